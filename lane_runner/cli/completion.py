"""A completed run's record (the ``completed`` event's ``metadata``) for people, as
sections: route, judge, delivery, usage and the rest, one line or block each.

``task show`` printed it as one line of about forty flattened ``metadata.*`` keys;
``--json`` keeps the document whole. Keys this module does not know are still shown,
as ``key: value`` lines, so nothing a newer runner records is hidden.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson

from lane_runner.cli.output import printable

Section = Callable[[Any], list[str]]


def _route(route: Any) -> list[str]:
    said = f"{route.get('provider')}/{route.get('model')} at {route.get('effort')} effort"
    why = route.get("reason")
    by = route.get("classifier")
    return [said + (f" ({by}: {why})" if why else "")]


def _judge(judge: Any) -> list[str]:
    verdict = "accepted" if judge.get("accepted") else "not accepted"
    return [f"{verdict} by the {judge.get('judge')} judge: {judge.get('reason')}"]


def _delivery(delivery: Any) -> list[str]:
    commits = delivery.get("commits") or []
    lines = [
        f"branch {delivery.get('branch')}, {len(commits)} commit(s) since "
        f"{str(delivery.get('base'))[:12]}, head {str(delivery.get('head'))[:12]}"
    ]
    return lines + str(delivery.get("diffstat") or "(no changes)").splitlines()


def _usage(usage: Any) -> list[str]:
    lines = []
    for scope in ("run", "task"):
        spent = usage.get(scope)
        if isinstance(spent, dict):
            unknown = "" if spent.get("cost_complete", True) else " (+ spend of unknown cost)"
            lines.append(f"this {scope}: {spent.get('total_tokens', 0):,} tokens, "
                         f"${float(spent.get('cost_usd') or 0):.4f}{unknown}")
    return lines + _by_role(usage)


def _by_role(usage: Any) -> list[str]:
    return [f"{role}: {spent.get('total_tokens', 0):,} tokens, "
            f"${float(spent.get('cost_usd') or 0):.4f}"
            for role, spent in (usage.get("by_role") or {}).items()]


def _verification(verification: Any) -> list[str]:
    """Each answer's checks and verdict, oldest first (docs/verification.md)."""
    lines = [f"{verification.get('check_turns', 0)} failing check turn(s) and "
             f"{verification.get('review_rounds', 0)} review round(s) fed back"]
    for number, each in enumerate(verification.get("rounds") or [], 1):
        for check in each.get("checks") or []:
            lines.append(f"answer {number}: `{check.get('command')}` {check.get('ended')} "
                         f"({check.get('seconds')} s)")
        verdict = each.get("verdict")
        if verdict:
            lines.append(f"answer {number}: {verdict.get('verdict')} by "
                         f"{verdict.get('reviewer')}: {verdict.get('summary')}")
            lines += [f"  [{f.get('severity')}] {f.get('file') or '(the change)'}"
                      f"{':' + str(f['line']) if f.get('line') else ''}: {f.get('text')}"
                      for f in verdict.get("findings") or []]
    return lines


def _listing(values: Any) -> list[str]:
    return [", ".join(str(v) for v in values) if values else "-"]


def _sessions(sessions: Any) -> list[str]:
    return [", ".join(f"{provider} {session}" for provider, session in sessions.items())]


#: The sections people read first, in this order, with their words.
SECTIONS: dict[str, tuple[str, Section]] = {
    "route": ("route", _route),
    "judge": ("judge", _judge),
    "delivery": ("delivery", _delivery),
    "changed_files": ("changed files", _listing),
    "tests_run": ("tests run", _listing),
    "verification": ("checks and review", _verification),
    "usage": ("usage", _usage),
    "sessions": ("sessions", _sessions),
}


def _goal(metadata: dict[str, Any]) -> Iterator[tuple[str, list[str]]]:
    """The goal's turns, for a task of more than one (one turn is no goal)."""
    turns = metadata.get("goal_turns")
    if isinstance(turns, int) and turns > 1:
        yield "goal", [f"accepted in turn {metadata.get('goal_turn')} of at most {turns}"]


def sections(metadata: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """Each section's title and lines: the known ones first, then every other key."""
    found: list[tuple[str, list[str]]] = []
    for key, (title, render) in SECTIONS.items():
        value = metadata.get(key)
        if value is None:
            continue
        try:
            found.append((title, render(value)))
        except (AttributeError, TypeError, ValueError):  # an older or odd shape: shown raw
            found.append((title, [_raw(value)]))
    found += list(_goal(metadata))
    shown = {*SECTIONS, "goal_turn", "goal_turns"}
    found += [(key, [_raw(value)]) for key, value in metadata.items()
              if key not in shown and value is not None]
    return found


def _raw(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def render(title: str, metadata: dict[str, Any]) -> str:
    """``title`` then each section, its first line beside its name, the rest under it."""
    found = sections(metadata)
    width = max((len(name) for name, _ in found), default=0) + 1
    lines = [title]
    for name, body in found:
        first, *rest = body or ["-"]
        lines.append(f"  {name + ':':<{width}} {printable(first)}")
        lines += [f"  {'':<{width}} {printable(line)}" for line in rest]
    return "\n".join(lines)
