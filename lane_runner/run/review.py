"""The reviewer: a second CLI that reads a completed answer's change and approves it or
asks for changes (docs/verification.md).

Who reviews is ``verifying.choose_reviewer``'s word (``auto``: a usable provider other
than the implementer's). The reviewer works in the task's worktree, in a session of its
own, under the run's lease and deadline, and answers ``schemas/review-result.schema.json``.
It is told the task, the change since the task's base (the worktree staged without
filters, ``run/snapshot.py``, and diffed tree to tree: no worktree file is converted) and
the checks' evidence. What it is asked is built here once, for the run and for the dry
run alike.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lane_runner import config, redact
from lane_runner.config import Config
from lane_runner.home import Home
from lane_runner.names import PROVIDERS
from lane_runner.router import Route, health
from lane_runner.run import git, snapshot
from lane_runner.run.delivery import printable
from lane_runner.run.verification import CheckRun

log = logging.getLogger(__name__)
#: How much of the diff the reviewer is shown (it can read the worktree for the rest).
MAX_DIFF_CHARS = 60_000
MAX_STAT_CHARS = 4000
PATCH_BEGINS = "\ndiff --git "

REVIEW_INSTRUCTIONS = (
    "You are reviewing another agent's change for the task above. Read the diff and the "
    "worktree; you may run read-only commands and the tests, but change no file. Judge "
    "whether the change does what the task asks, correctly and safely, and whether its "
    "tests cover it. Answer with one JSON object matching the review schema: verdict "
    "(approve or request_changes), summary, and findings (file relative to the worktree, "
    "line, severity blocker|major|minor|nit, text). Request changes only for what must "
    "change before the work is accepted; nits alone are no reason to."
)


def route_for(cfg: Config, reviewer: str, effort: str) -> Route:
    """The reviewer's route: the static policy's model of that provider at the
    implementer's effort (a review is not routed through the router)."""
    models = config.cli_models(cfg, reviewer)
    model = models.get(effort) or next(iter(models.values()), "")
    return Route(reviewer, model, effort, "", "review", f"reviewer for {effort} effort", 0)


def unusable(home: Home, binaries: Mapping[str, Path | None], now: float) -> list[str]:
    """Providers a reviewer should not be: not installed, or freshly unavailable."""
    down = {h.provider for h in health.read_all(home.provider_health)
            if h.state == "unavailable" and h.fresh(now)}
    return [p for p in PROVIDERS if p in down or binaries.get(p) is None]


@dataclass(frozen=True)
class Change:
    """What the reviewer is shown of the worktree's change, and the staging it was read
    from (None: none was made), which the result's commit reuses while nothing changed."""

    stat: str = ""
    diff: str = ""
    staged: snapshot.Staged | None = None


def change_since(worktree: Path, base: str | None, owner: str | None) -> Change:
    """The worktree's change since ``base``: its diff stat and diff (bounded); empty
    when there is no base (a host's workspace) or git cannot say."""
    if base is None:
        return Change()
    try:
        taken, tree = snapshot.stage(worktree, owner)
    except (snapshot.StagingError, OSError) as error:
        log.warning("no diff for the reviewer of %s: %s", worktree, error)
        return Change()
    staged = snapshot.Staged(taken, tree)
    # One call for both (each git call is a supervised process tree): the stat, a blank
    # line, then the patch, each file's part of which begins "diff --git " on its own line
    # (a stat line begins with a space).
    said = git.run("diff-tree", "-r", "-M", "--stat=100", "-p", *git.DIFF, base, tree,
                   cwd=worktree, owner=owner)
    if said.returncode != 0:
        return Change(staged=staged)
    stat, found, patch = said.stdout.partition(PATCH_BEGINS)
    return Change(stat.rstrip()[:MAX_STAT_CHARS], (found.lstrip("\n") + patch)[:MAX_DIFF_CHARS],
                  staged)


def prompt(
    task_context: str,
    summary: str,
    diffstat: str,
    diff: str,
    checks: Sequence[CheckRun],
) -> str:
    """What the reviewer is asked: the task, the implementer's summary, the checks'
    evidence, the change, and how to answer. The implementer's words and the diff are
    quoted data: credentials hidden, control characters escaped."""
    parts = [task_context]
    parts.append("## The implementer's summary\n" + printable(redact.shown(summary, 4000), 4000))
    if checks:
        lines = [f"- `{c.command}`: {c.ended} in {c.seconds:.1f} s" for c in checks]
        parts.append("## Acceptance checks (all passed)\n" + "\n".join(lines))
    cut = "\n[diff cut: read the worktree for the rest]" if len(diff) >= MAX_DIFF_CHARS else ""
    shown = printable(redact.shown(diff, MAX_DIFF_CHARS), MAX_DIFF_CHARS)
    parts.append(
        f"## The change since the task's base\n{diffstat or '(no diff stat)'}\n\n"
        f"```diff\n{shown or '(no change)'}{cut}\n```"
    )
    parts.append(REVIEW_INSTRUCTIONS)
    return "\n\n".join(parts)
