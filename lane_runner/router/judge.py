"""Goal judges: is a worker's structured answer the end of the task, or another turn?

The structural judge reads only the answer itself, so it is pure and always
available. The router judge asks the model router as well, but only about
answers that already pass the structural check: a router cannot make an
answer with blockers complete, and asking would only cost a round trip.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any, Protocol

import orjson

from lane_runner import redact
from lane_runner.config import Config
from lane_runner.errors import UsageError
from lane_runner.router.errors import RoutingError
from lane_runner.router.http import HttpRouter
from lane_runner.router.route import bounded
from lane_runner.router.verdict import Verdict

log = logging.getLogger(__name__)

# Upper-case markers are matched case-sensitively ("a todo list app" is finished work);
# phrases are matched in any case. Word boundaries keep "TODOs" out of "TODO" and
# "remaining workflow" out of "remaining work". Lone adjectives such as "incomplete" are
# left out: "handles incomplete UTF-8 input" describes finished work.
_MARKERS = re.compile(
    r"\b(?:TODO|FIXME|XXX|TBD|WIP)\b"
    r"|(?i:\b(?:not yet implemented|not implemented yet|remaining work|work remaining"
    r"|follow[- ]up (?:is )?needed|still needs?|left to do|work in progress)\b)"
)


class Judge(Protocol):
    def judge(self, context: str, result: Mapping[str, Any]) -> Verdict: ...


def structural_verdict(result: Mapping[str, Any]) -> Verdict:
    """Accept a completed answer with no blockers and a summary that claims no unfinished work."""
    status = result.get("status")
    if status != "completed":
        return Verdict(False, f"status is {status!r}, not 'completed'")
    blockers = result.get("blockers") or []
    if blockers:
        return Verdict(False, bounded(f"{len(blockers)} blocker(s) reported: {blockers[0]}"))
    summary = result.get("summary")
    if not isinstance(summary, str) or not summary.strip():
        return Verdict(False, "the summary is empty")
    marker = _MARKERS.search(summary)
    if marker:
        return Verdict(False, f"the summary mentions unfinished work ({marker.group(0)!r})")
    return Verdict(True, "completed with a summary, no blockers and no unfinished-work markers")


class StructuralJudge:
    def judge(self, context: str, result: Mapping[str, Any]) -> Verdict:
        return structural_verdict(result)


class RouterJudge:
    """The structural check first, then the router's ``lane/judge`` route.

    Whatever goes wrong while asking the router (a routing error, an answer that
    cannot be serialised, a defect in between), the structural verdict stands:
    the router judge only adds a check to an answer that already passed one, so
    losing it must never throw a valid result away.
    """

    def __init__(self, router: HttpRouter) -> None:
        self._router = router

    def judge(self, context: str, result: Mapping[str, Any]) -> Verdict:
        verdict = structural_verdict(result)
        if not verdict.accepted:
            return verdict
        try:
            answer = orjson.dumps(dict(result), option=orjson.OPT_INDENT_2).decode()
            return self._router.judge(context, answer)
        except Exception as error:  # noqa: BLE001 - any judge failure: the structural verdict stands
            log.warning(
                "router judge failed (%s: %s); the structural verdict stands",
                type(error).__name__,
                redact.text(str(error)),
                exc_info=not isinstance(error, RoutingError),
            )
            return Verdict(verdict.accepted, f"{verdict.reason} (router judge unavailable)")


def make_judge(cfg: Config, router: object) -> Judge:
    """``judge`` unset: structural; ``router``: the router judge, which needs ``router_url``."""
    if not cfg.judge:
        return StructuralJudge()
    if cfg.judge != "router":
        raise UsageError(f"bad value for judge: {cfg.judge!r}: expected empty or 'router'")
    if not cfg.router_url or not isinstance(router, HttpRouter):
        raise UsageError("judge = 'router' needs router_url; set it or leave judge empty")
    return RouterJudge(router)
