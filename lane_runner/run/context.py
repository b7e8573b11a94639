"""What a worker is told: the task, its parents' results, recent comments (pure)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

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


#: What a resumed session is told when nothing new is to be said: the run that asked it
#: before ended (a restart, a usage limit that has reset, a cooldown) and this one carries on.
CARRY_ON = (
    "Your work on this task was interrupted (the runner restarted, or a usage limit has "
    "reset). Reinspect the workspace, finish the outstanding work and answer again."
)


#: The dry run's placeholder for what a resumed turn is told.
WHAT_IS_NEW = "<the check's output, the reviewer's findings or why the answer was not accepted>"


def resumed_prompt(continuation: str, handoff: str = "") -> str:
    """The prompt for a turn in a session that already holds the task and the rules: only
    what is new (the handoff, the check's output, the findings, the reason), and the answer
    contract again, which a resumed CLI's answer is read by.

    Every goal turn once resent the whole task context; a resumed session has it in its
    history, and paying for it again each turn is the model's bill, not the runner's.
    """
    parts = []
    if handoff:
        parts.append("## Handoff\n" + handoff)
    parts.append("## Continue\n" + (continuation or CARRY_ON))
    parts.append(RESULT_INSTRUCTIONS)
    return "\n\n".join(parts)


def told(context: str) -> str:
    """What a session was told, as the lane state keeps it: a digest of the task context.
    A resumed session gets only what is new while the task's context is what it was told;
    a body edited or a comment added since gets it whole again."""
    return hashlib.sha256(context.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Prompts:
    """One turn's prompt for a new session (``whole``) and for a resumed one (``resumed``,
    None: the whole prompt either way, as a reviewer's), and the digest of the context."""

    whole: str
    resumed: str | None = None
    context: str = ""

    def chosen(self, resume: bool, told: str | None) -> tuple[str, str | None]:
        """(what the start is given, what a fresh session after a lost one would be): a
        resumed session that was ``told`` this context gets only what is new, and the
        whole prompt is kept for the fresh one; any other start gets the whole prompt."""
        if resume and self.resumed is not None and self.context and told == self.context:
            return self.resumed, self.whole
        return self.whole, None


def turn_prompts(context: str, handoff: str = "", continuation: str = "") -> Prompts:
    """A goal turn's prompts: the whole one, and what a session told ``context`` gets."""
    return Prompts(
        worker_prompt(context, handoff, continuation),
        resumed_prompt(continuation, handoff),
        told(context),
    )


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
