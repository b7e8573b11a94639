"""What a worker is told: the task, its parents' results, recent comments (pure)."""

from __future__ import annotations

from collections.abc import Sequence

from lane_runner import display, redact
from lane_runner.board.model import Comment, Task

RECENT_COMMENTS = 10
#: How an unattended worker must treat the workspace it is given: it shares the
#: repository with people, and nobody watches it work.
OPERATING_RULES = (
    "Operating rules: inspect the workspace before editing; keep changes you did not "
    "make (they are someone else's work); run the tests that cover what you changed; "
    "never force-push, hard-reset or clean untracked files; never call partial work "
    "completed: answer 'incomplete' while anything the task asks for remains, and "
    "'blocked' only when an obstacle stops the task itself."
)
RESULT_INSTRUCTIONS = (
    "When you stop, answer with one JSON object matching the worker result schema: "
    "status (completed, incomplete or blocked), summary, changed_files, tests_run, "
    "artifacts, findings and blockers. 'completed' requires empty blockers; review "
    "findings go in findings."
)


def task_context(task: Task, parents: Sequence[Task], comments: Sequence[Comment]) -> str:
    """The task as routers and workers read it."""
    parts = [
        f"# Task {task.board}/{task.id}: {task.title}",
        task.body.strip() or "(no description)",
    ]
    for parent in parents:
        summary = parent.summary or "(no summary)"
        changed = ", ".join((parent.result or {}).get("changed_files", [])) or "none"
        heading = f"## Result of parent task {parent.id}: {parent.title}"
        parts.append(f"{heading}\n{summary}\nChanged files: {changed}")
    recent = [c for c in comments if c.author != "lane-runner"][-RECENT_COMMENTS:]
    if recent:
        parts.append("## Recent comments\n" + "\n".join(f"- {c.author}: {c.body}" for c in recent))
    return "\n\n".join(parts)


def worker_prompt(context: str, handoff: str = "", continuation: str = "") -> str:
    """The prompt for one provider turn: context, any handoff or goal feedback, the rules and
    the answer contract."""
    parts = [context]
    if handoff:
        parts.append("## Handoff\n" + handoff)
    if continuation:
        parts.append("## Continue\n" + continuation)
    parts.append(OPERATING_RULES)
    parts.append(RESULT_INSTRUCTIONS)
    return "\n\n".join(parts)


#: How much of the previous failure's words the next attempt is told.
MAX_LESSON_CHARS = 1000


def after_failure(reason: str | None) -> str:
    """What the next attempt is told when the previous one failed in a way the worker can
    act on (an answer not given through the schema, an invalid result, a timeout, a
    stall, a failing hook): why, so it does not repeat it; nothing after any other ending.

    The reason quotes a CLI, a hook or a model: it is cut to ``MAX_LESSON_CHARS``, its
    credentials hidden, and given on one line in quotes with control characters, quotes
    and newlines escaped, so it reads as a quotation, never as instructions of ours or a
    terminal's escape sequence.
    """
    if reason is None:
        return ""
    quoted = display.escaped(redact.shown(reason, MAX_LESSON_CHARS)).replace('"', '\\"')
    return (
        f'The previous attempt at this task was not accepted: "{quoted}"\n'
        "Reinspect the workspace, finish the work and answer as the instructions below say."
    )
