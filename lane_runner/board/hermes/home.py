"""Finding a Hermes Agent home and deciding whether lane-runner may serve it.

A Hermes home holds ``kanban.db`` (the ``default`` board) and
``kanban/boards/<slug>/kanban.db`` (the others). ``board_url = "hermes://"`` means
the home Hermes itself would use (``HERMES_KANBAN_HOME``, else ``HERMES_HOME``,
else its default); ``hermes:///abs/path`` names one. Everything here checks
before anything is opened: Hermes's ``connect`` creates a missing database, so a
mistyped path must be refused here rather than become a new, empty board.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import logging
import os
import sqlite3
from pathlib import Path
from types import ModuleType

from lane_runner import extras
from lane_runner.board.hermes import pins, transaction
from lane_runner.errors import LaneRunnerError, UsageError

log = logging.getLogger(__name__)

SCHEME = "hermes://"
DISTRIBUTION = "hermes-agent"
#: The hermes-agent releases this backend was built and tested against: [lowest, first unsupported).
SUPPORTED = ((0, 19), (0, 20))
DEFAULT_BOARD = "default"
#: Keyword arguments each upstream call must accept; its exact-run guards rest on them.
API: dict[str, tuple[str, ...]] = {
    "connect": ("db_path",),
    "write_txn": (),
    "scoped_current_board": (),
    "list_boards": ("include_archived",),
    "assign_task": (),
    "claim_task": ("ttl_seconds", "claimer"),
    "claim_review_task": ("ttl_seconds", "claimer"),
    "heartbeat_claim": ("ttl_seconds", "claimer"),
    "heartbeat_worker": ("note", "expected_run_id"),
    "complete_task": ("result", "summary", "metadata", "expected_run_id"),
    "block_task": ("reason", "kind", "expected_run_id"),
    "add_comment": (),
    "build_worker_context": (),
    "resolve_workspace": ("board",),
    "_resolve_worktree_workspace": ("board",),
    "_repo_root_for_worktree_target": (),
    "read_board_metadata": (),
    "store_attachment_bytes": ("uploaded_by", "board"),
    "worker_log_path": ("board",),
    "_rotate_worker_log": (),
    "set_workspace_path": (),
    "set_branch_name": (),
    "_end_run": ("outcome", "status", "error", "metadata"),
    "_append_event": ("run_id",),
    # Replaced in this process by pins.install: they close descriptors of the database.
    **{name: () for name in pins.REPLACED},
    # Deferred by transaction.install until one_transaction commits.
    transaction.HOOK: (),
}
#: Columns the backend reads or guards on; a database without them is from another Hermes.
COLUMNS: dict[str, frozenset[str]] = {
    "tasks": frozenset(
        {
            "id",
            "title",
            "body",
            "assignee",
            "status",
            "priority",
            "created_at",
            "workspace_kind",
            "workspace_path",
            "branch_name",
            "claim_lock",
            "claim_expires",
            "result",
            "consecutive_failures",
            "last_failure_error",
            "max_runtime_seconds",
            "current_run_id",
            "max_retries",
            "goal_mode",
            "goal_max_turns",
            "block_kind",
            "skills",
            "model_override",
        }
    ),
    "task_runs": frozenset(
        {
            "id",
            "task_id",
            "status",
            "claim_lock",
            "claim_expires",
            "last_heartbeat_at",
            "started_at",
            "ended_at",
            "outcome",
            "summary",
            "metadata",
            "error",
        }
    ),
    "task_links": frozenset({"parent_id", "child_id"}),
    "task_events": frozenset({"id", "task_id", "run_id", "kind", "payload", "created_at"}),
    "task_comments": frozenset({"id", "task_id", "author", "body", "created_at"}),
}
#: Variables that would point every board of the home at one file or one workspace root.
REDIRECTING_VARIABLES = ("HERMES_KANBAN_DB", "HERMES_KANBAN_BOARD", "HERMES_KANBAN_WORKSPACES_ROOT")


class HermesUnusable(LaneRunnerError):
    """This Hermes installation cannot be served; the message says why and what to do."""


def kanban() -> ModuleType:
    """``hermes_cli.kanban_db``, checked: the installed release and its calls are ones we know."""
    try:
        module = importlib.import_module("hermes_cli.kanban_db")
    except ImportError as error:
        raise HermesUnusable(
            "board_url names a Hermes board but hermes-agent is not installed "
            f"({error}): {extras.install_hint('hermes')}"
        ) from error
    check_version(installed_version())
    check_api(module)
    pins.install(module)
    transaction.install(module)
    return module


def installed_version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as error:
        raise HermesUnusable(
            "hermes_cli is importable but the hermes-agent distribution is not installed: "
            f"{extras.install_hint('hermes')}"
        ) from error


def check_version(version: str) -> None:
    """Refuse releases outside ``SUPPORTED``: upstream's kanban API changes between them."""
    low, high = SUPPORTED
    wanted = f">={low[0]}.{low[1]},<{high[0]}.{high[1]}"
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        raise HermesUnusable(
            f"hermes-agent version {version!r} is not a release number; install {wanted}"
        ) from None
    if (major, minor) < low:
        raise HermesUnusable(
            f"hermes-agent {version} is too old for lane-runner (needs {wanted}): "
            f"pip install 'hermes-agent{wanted}'"
        )
    if (major, minor) >= high:
        raise HermesUnusable(
            f"hermes-agent {version} is newer than lane-runner was tested with ({wanted}); "
            f"pip install 'hermes-agent{wanted}' or upgrade lane-runner"
        )


def check_api(module: ModuleType) -> None:
    """Every call the backend makes exists and takes the keywords it passes."""
    missing = []
    for name, keywords in API.items():
        function = getattr(module, name, None)
        if not callable(function):
            missing.append(name)
            continue
        parameters = inspect.signature(function).parameters
        missing += [f"{name}({keyword}=)" for keyword in keywords if keyword not in parameters]
    if missing:
        raise HermesUnusable(
            "this hermes-agent lacks the kanban API lane-runner uses: "
            f"{', '.join(missing)}; install hermes-agent>={SUPPORTED[0][0]}.{SUPPORTED[0][1]}"
        )


def locate(url: str, module: ModuleType) -> Path:
    """The home ``url`` names, checked to be one (``hermes://`` or ``hermes:///abs/path``)."""
    if not url.startswith(SCHEME):
        raise UsageError(f"board_url {url!r} is not a hermes:// URL")
    rest = url[len(SCHEME) :]
    if rest in ("", "/"):
        home = Path(module.kanban_home())
        hint = "HERMES_HOME (or Hermes's default home)"
    elif rest.startswith("/"):
        home = Path(rest)
        hint = "board_url"
    else:
        raise UsageError(
            f"board_url {url!r}: write hermes:// for Hermes's own home, or "
            "hermes:///absolute/path/to/home (three slashes) for another one"
        )
    check_home(home, hint)
    return home.resolve()


def check_home(home: Path, named_by: str = "board_url") -> None:
    if not home.is_dir():
        raise UsageError(
            f"{named_by} names {home}, which is not a directory: "
            f"create the Hermes home with 'HERMES_HOME={home} hermes kanban init'"
        )
    if not (home / "kanban.db").is_file():
        raise UsageError(
            f"{named_by} names {home}, which is not a Hermes home (no kanban.db there): "
            f"run 'HERMES_HOME={home} hermes kanban init', or point board_url at the "
            "directory that holds kanban.db"
        )


def board_db(home: Path, slug: str) -> Path:
    """Where Hermes keeps a board's database (``default`` at the top, for its back-compat)."""
    if slug == DEFAULT_BOARD:
        return home / "kanban.db"
    return home / "kanban" / "boards" / slug / "kanban.db"


def pin(home: Path) -> None:
    """Make Hermes's own path functions (workspaces, logs, board list) resolve to ``home``.

    Hermes reads its home from the environment on every call. The daemon serves one
    board_url, so it pins that home for its process; variables that would send every
    board to one file are dropped (with a warning) rather than obeyed. Workers get an
    allow-listed environment, so none of this reaches the CLIs.
    """
    for name in REDIRECTING_VARIABLES:
        if os.environ.pop(name, None) is not None:
            log.warning("%s is ignored: lane-runner serves every board of %s", name, home)
    os.environ["HERMES_KANBAN_HOME"] = str(home)


def lane_profiles(home: Path) -> list[str]:
    """Hermes profiles named like a lane: Hermes's dispatcher would spawn them for our tasks."""
    profiles = home / "profiles"
    if not profiles.is_dir():
        return []
    return sorted(p.name for p in profiles.iterdir() if p.is_dir() and p.name.startswith("cli-"))


def missing_columns(connection: sqlite3.Connection) -> list[str]:
    """Columns the backend needs that this database lacks (empty: the schema is usable)."""
    missing = []
    for table, wanted in COLUMNS.items():
        present = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
        missing += [f"{table}.{column}" for column in sorted(wanted - present)]
    return missing
