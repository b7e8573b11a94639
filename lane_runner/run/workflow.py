"""The repository's own word on its tasks: ``.lane-runner/workflow.md`` (docs/verification.md).

A TOML front matter between ``+++`` lines (``checks``, ``review``, ``check_turns``,
``review_rounds``) and a body of instructions every worker and reviewer of the
repository's tasks is given, with the task's fields (``{title}``, ``{id}``, ``{board}``,
``{branch}``) filled in. It is read from the task's base commit with ``git show``,
never from the worktree: a worker cannot rewrite the rules its own answer is held to.

Board settings win over it (a key the configuration sets, file or environment), and
task settings over both; ``resolve`` says where each value came from, for ``run
--dry-run``. A file that cannot be read as a workflow is ignored and said so: it is the
repository's, and a mistake in it must not stop the board.
"""

from __future__ import annotations

import logging
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lane_runner.board.model import Task
from lane_runner.config import Config
from lane_runner.config.checks import _checks, _integer, review_choice
from lane_runner.names import PROVIDERS, is_model_name
from lane_runner.run import git
from lane_runner.run.verifying import Policy, policy_of

log = logging.getLogger(__name__)
PATH = ".lane-runner/workflow.md"
HEADING = "## The repository's instructions (.lane-runner/workflow.md)"
FENCE = "+++"
MAX_BYTES = 64 * 1024
MAX_INSTRUCTIONS_CHARS = 8000
#: The front matter's keys and what each is checked as.
KEYS = ("checks", "review", "check_turns", "review_rounds")
#: The front matter's model per provider (``model = {codex = "…"}``), used when the
#: static policy routes and the configuration names no models of that provider.
MODEL = "model"
_FIELD = re.compile(r"\{(title|id|board|branch)\}")


@dataclass(frozen=True)
class Workflow:
    """What the repository's workflow file says (nothing when it has none)."""

    settings: Mapping[str, Any] = field(default_factory=dict)
    instructions: str = ""
    problem: str | None = None  # why the file was ignored, for the log and the dry run


def parse(text: str) -> Workflow:
    """A workflow file's front matter, checked key by key, and its body."""
    body, front = text, ""
    if text.startswith(FENCE + "\n"):
        end = text.find("\n" + FENCE, len(FENCE))
        if end < 0:
            return Workflow(problem=f"{PATH}: the front matter has no closing {FENCE}")
        front, body = text[len(FENCE) + 1 : end], text[end + len(FENCE) + 1 :]
    try:
        raw = tomllib.loads(front)
        unknown = sorted(set(raw) - {*KEYS, MODEL})
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: not one of {', '.join((*KEYS, MODEL))}")
        settings = {key: _checked(key, value) for key, value in raw.items()}
    except (tomllib.TOMLDecodeError, ValueError) as error:
        return Workflow(problem=f"{PATH}: {error}")
    return Workflow(settings, body.strip()[:MAX_INSTRUCTIONS_CHARS])


def _checked(key: str, value: Any) -> Any:
    if key == MODEL:
        if not isinstance(value, dict) or not all(
            p in PROVIDERS and isinstance(m, str) and is_model_name(m) for p, m in value.items()
        ):
            raise ValueError(f"model: expected a table of provider = model name "
                             f"({', '.join(PROVIDERS)})")
        return dict(value)
    if key == "checks":
        return _checks(value)["*"]
    if key == "review":
        return review_choice(value)
    return _integer(0, 20)(value)


def read(worktree: Path, base: str | None, owner: str | None) -> Workflow:
    """The workflow file as the task's base commit holds it; none without a base or a file."""
    if base is None:
        return Workflow()
    said = git.run("show", f"{base}:{PATH}", cwd=worktree, owner=owner)
    if said.returncode != 0:
        return Workflow()  # no such file at the base: the usual case
    if len(said.stdout.encode()) > MAX_BYTES:
        return Workflow(problem=f"{PATH} is larger than {MAX_BYTES} bytes")
    found = parse(said.stdout)
    if found.problem:
        log.warning("ignoring the repository's workflow: %s", found.problem)
    return found


@dataclass(frozen=True)
class Resolved:
    """The policy a task's answers are held to, and where each of its values came from."""

    policy: Policy
    sources: Mapping[str, str]


def task_settings(task: Task) -> dict[str, Any]:
    """What the task itself says of its verification (``TaskSettings``: ``task add
    --check/--review``)."""
    return {"checks": list(task.settings.checks) or None, "review": task.settings.review}


def resolve(
    cfg: Config, board: str, workflow: Workflow, task: Mapping[str, Any] | None = None
) -> Resolved:
    """The task's settings (``task_settings``) win, then the board's (a key the
    configuration sets), then the workflow file's, then the defaults."""
    chosen = policy_of(cfg, board)
    values: dict[str, Any] = {
        "checks": list(chosen.checks), "review": chosen.review,
        "check_turns": chosen.check_turns, "review_rounds": chosen.review_rounds,
    }
    sources = {key: f"config ({cfg.sources.get(key, 'default')})" for key in KEYS}
    for key in KEYS:
        if cfg.sources.get(key, "default") == "default" and key in workflow.settings:
            values[key], sources[key] = workflow.settings[key], f"workflow ({PATH})"
    for key, value in (task or {}).items():
        if key in KEYS and value is not None:
            values[key], sources[key] = value, "task"
    policy = Policy(tuple(values["checks"]), values["review"], values["check_turns"],
                    values["review_rounds"], chosen.check_timeout)
    return Resolved(policy, sources)


def model_for(cfg: Config, workflow: Workflow, provider: str) -> str | None:
    """The workflow's model for ``provider``: only under the static policy, and only when
    the configuration names none of that provider's models itself (the board wins)."""
    if cfg.router_url is not None or cfg.sources.get(f"{provider}_models", "default") != "default":
        return None
    model: str | None = dict(workflow.settings.get(MODEL, {})).get(provider)
    return model


def instructions(workflow: Workflow, fields: Mapping[str, str]) -> str:
    """The body with the task's fields (``{title}``, ``{id}``, ``{board}``, ``{branch}``)
    filled in; any other brace is left as written (a code sample is no error)."""
    return _FIELD.sub(lambda found: fields.get(found.group(1), found.group(0)),
                      workflow.instructions)


def fields_of(task: Task, branch: str) -> dict[str, str]:
    """The task's fields a workflow body may name."""
    return {"title": task.title, "id": task.id, "board": task.board, "branch": branch}
