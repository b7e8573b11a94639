"""An accepted answer made to fit where it is kept (docs/ARCHITECTURE.md §3.2).

A terminal record and the lane state that carries an accepted result are at most
1 MiB each, and a record holds the summary twice; a CLI may hand over far more
(claude's result line may be 10 MiB). Refusing such an answer would throw finished
work away, so the result that is committed is cut to fit, and says so, while the
run's candidate file in the journal keeps the answer whole.
"""

from __future__ import annotations

from typing import Any

import orjson

from lane_runner import display

#: What the summary and each list may take, as encoded JSON: with the summary twice, a
#: record stays well under 1 MiB whatever the metadata holds.
SUMMARY_BYTES = 64 * 1024
LIST_BYTES = 32 * 1024
ITEM_BYTES = 4 * 1024
LISTS = ("changed_files", "tests_run", "artifacts", "findings", "blockers")


def fitted(result: dict[str, Any], board: str) -> dict[str, Any]:
    """``result`` as it is committed: unchanged when it fits, else each text clipped and
    each list cut short, with a finding saying where the whole answer is."""
    if not _too_big(result):
        return result
    kept = dict(result, summary=_fit_text(result["summary"], SUMMARY_BYTES))
    for name in LISTS:
        kept[name] = _fit_list(result[name])
    kept["findings"] = [
        *kept["findings"],
        f"lane-runner cut this answer to fit its journal; the whole answer is this run's "
        f"candidate in lanes/{board}/ (lane-runner journal ls --board {board})",
    ]
    return kept


def _too_big(result: dict[str, Any]) -> bool:
    if _size(result["summary"]) > SUMMARY_BYTES:
        return True
    return any(
        _size(result[name]) > LIST_BYTES or any(_size(item) > ITEM_BYTES for item in result[name])
        for name in LISTS
    )


def _fit_list(items: list[str]) -> list[str]:
    """The first items whose encoded total fits ``LIST_BYTES``, each clipped to ``ITEM_BYTES``."""
    kept: list[str] = []
    used = 2  # the brackets
    for item in items:
        fit = _fit_text(item, ITEM_BYTES)
        used += _size(fit) + 1
        if used > LIST_BYTES:
            break
        kept.append(fit)
    return kept


def _fit_text(text: str, budget: int) -> str:
    """``text`` clipped until its JSON encoding takes at most ``budget`` bytes (an escaped
    control character takes six)."""
    fit, limit = text, budget
    while _size(fit) > budget:
        fit = display.clipped(text, limit)
        limit //= 2
    return fit


def _size(value: object) -> int:
    return len(orjson.dumps(value))
