"""Why a task's result should be trusted, from its completed event's metadata (pure):
its diff stat since the base, its acceptance checks, the reviewer's verdict and
findings, the turns it took, and tokens and dollars per role (docs/verification.md).

``task show`` gives it under ``evidence`` (``--json``) and ``lane-runner evidence TASK``
prints it as Markdown fit for a pull request's body. Everything in it was written by
the runner at completion; the texts in it (a check's output, a reviewer's words) are
shown as the redaction gate let them onto the board.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lane_runner.board.model import Event, Task

#: How much of a check's output tail the Markdown shows (the JSON keeps what the board has).
SHOWN_TAIL_CHARS = 1500


def completed_metadata(events: Sequence[Event]) -> tuple[int | None, dict[str, Any]] | None:
    """The latest completion's run and metadata; None before the task is done."""
    for event in reversed(events):
        if event.kind in ("completed", "replayed"):
            metadata = event.data.get("metadata")
            return event.run_id, metadata if isinstance(metadata, dict) else {}
    return None


def document(
    task: Task, events: Sequence[Event], spent: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """The task's evidence as a document (``--json``); None before it is done.

    ``spent``: the task's spend as the usage ledger totals it now (``Spend.task_usage``,
    by role from each record's own role); the completed event's copy stands in when the
    ledger holds none of the task's records (the home's pruned, the board keeps none)."""
    found = completed_metadata(events)
    if found is None:
        return None
    run_id, metadata = found
    verification = metadata.get("verification") or {}
    delivery = metadata.get("delivery") or {}
    usage = metadata.get("usage") or {}
    if spent is not None and spent.get("records"):
        usage = {"task": spent, "by_role": spent.get("by_role")}
    rounds = verification.get("rounds") or []
    return {
        "board": task.board,
        "task_id": task.id,
        "title": task.title,
        "run_id": run_id,
        "summary": task.summary,
        "diff": {
            "base": delivery.get("base"),
            "head": delivery.get("head"),
            "files": delivery.get("files_changed"),
            "insertions": delivery.get("insertions"),
            "deletions": delivery.get("deletions"),
            "stat": delivery.get("diffstat"),
        },
        "checks": (rounds[-1].get("checks") if rounds else None) or [],
        "verdict": rounds[-1].get("verdict") if rounds else None,
        "rounds": rounds,
        "turns": {
            "goal_turn": metadata.get("goal_turn"),
            "check_turns": verification.get("check_turns", 0),
            "review_rounds": verification.get("review_rounds", 0),
        },
        "usage_by_role": usage.get("by_role") or {},
        "usage": usage.get("task"),
    }


def markdown(evidence: dict[str, Any]) -> str:
    """The evidence as Markdown for a pull request's body."""
    lines = [f"## {evidence['title']}", "", evidence.get("summary") or "", ""]
    lines += _diff(evidence["diff"])
    lines += _checks(evidence["checks"], evidence["turns"]["check_turns"])
    lines += _review(evidence["verdict"], evidence["turns"]["review_rounds"])
    lines += _earlier(evidence["rounds"][:-1])
    lines += _usage(evidence["usage_by_role"])
    lines.append(
        f"<sub>lane-runner: {evidence['board']}/{evidence['task_id']}, run {evidence['run_id']}"
        "</sub>"
    )
    return "\n".join(lines).rstrip() + "\n"


def _diff(diff: dict[str, Any]) -> list[str]:
    if not diff.get("stat"):
        return []
    head = (
        f"### Change: {diff.get('files') or 0} file(s), +{diff.get('insertions') or 0} "
        f"-{diff.get('deletions') or 0} since `{str(diff.get('base'))[:12]}`"
    )
    return [head, "", "```", str(diff["stat"]), "```", ""]


def _checks(checks: list[dict[str, Any]], turns: int) -> list[str]:
    if not checks:
        return []
    fed = f" ({turns} failing turn(s) fed back first)" if turns else ""
    lines = [f"### Acceptance checks{fed}", "", "| check | exit | seconds |", "|---|---|---|"]
    for check in checks:
        command = str(check.get("command", "")).replace("|", "\\|")
        lines.append(f"| `{command}` | {check.get('exit_code')} | {check.get('seconds')} |")
    lines.append("")
    for check in checks:
        tail = str(check.get("tail") or "").strip()[-SHOWN_TAIL_CHARS:]
        if tail:
            lines += [
                f"<details><summary><code>{_html(check.get('command', ''))}</code> output"
                "</summary>", "", "```", tail.replace("```", "'''"), "```", "</details>", "",
            ]
    return lines


def _review(verdict: dict[str, Any] | None, rounds: int) -> list[str]:
    if verdict is None:
        return []
    fed = f" after {rounds} round(s) of changes" if rounds else ""
    lines = [
        f"### Review: {verdict.get('verdict')} by {verdict.get('reviewer')} "
        f"({verdict.get('model')}){fed}", "", str(verdict.get("summary") or ""), "",
    ]
    for finding in verdict.get("findings") or []:
        where = finding.get("file") or "(the change)"
        if finding.get("line"):
            where = f"{where}:{finding['line']}"
        lines.append(f"- **{finding.get('severity')}** `{where}`: {finding.get('text')}")
    return [*lines, ""] if verdict.get("findings") else lines


def _earlier(rounds: list[dict[str, Any]]) -> list[str]:
    """The changes reviewers asked for before the approval, with their findings."""
    asked = [r["verdict"] for r in rounds if (r.get("verdict") or {}).get("verdict")
             == "request_changes"]
    if not asked:
        return []
    lines = ["<details><summary>Changes asked before</summary>", ""]
    for verdict in asked:
        lines += [line for line in _review(verdict, 0)[2:] if line]
    return [*lines, "", "</details>", ""]


def _usage(by_role: dict[str, Any]) -> list[str]:
    if not by_role:
        return []
    lines = ["### Spend", "", "| role | tokens | dollars |", "|---|---|---|"]
    for role, spent in by_role.items():
        unknown = "" if spent.get("cost_complete", True) else " (+ unknown)"
        lines.append(f"| {role} | {spent.get('total_tokens', 0):,} | "
                     f"${float(spent.get('cost_usd') or 0):.4f}{unknown} |")
    return [*lines, ""]


def _html(text: Any) -> str:
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
