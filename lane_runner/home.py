"""The home directory layout (docs/ARCHITECTURE.md §3.1), in one place.

Everything the runner keeps lives under one home; this module names the paths
and creates the directories with private modes. It decides nothing else.
"""

from __future__ import annotations

import os
import stat
import uuid
from dataclasses import dataclass
from pathlib import Path

from journal.pin import kind_of
from lane_runner import files
from lane_runner.names import check_name
from lane_runner.providers.registry import ADAPTERS

NODE_ID_BYTES = 256


def settings_name(provider: str) -> str:
    """The name of the settings file the runner writes for ``provider``'s runs."""
    return f"{provider}-settings.json"


WIRE_SCHEMA = "worker-result.wire.json"
#: What a reviewer is handed (docs/verification.md).
REVIEW_WIRE_SCHEMA = "review-result.wire.json"
#: Files of the home a worker user reads: no secrets in them, 0644. Besides the wire
#: schemas, the settings file of each CLI that has one (``claude-settings.json``).
SHARED_FILES = (
    WIRE_SCHEMA,
    REVIEW_WIRE_SCHEMA,
    *(settings_name(cli.name) for cli in ADAPTERS.values() if cli.settings_file() is not None),
)


@dataclass(frozen=True)
class Home:
    root: Path

    def settings_file(self, provider: str) -> Path:
        """The settings file ``provider``'s runs get (claude ``--settings``); a CLI without
        one is never handed it."""
        return self.root / settings_name(provider)

    @property
    def boards(self) -> Path:
        return self.root / "boards"

    def board_file(self, board: str) -> Path:
        return self.boards / f"{check_name('board', board)}.db"

    @property
    def lanes(self) -> Path:
        return self.root / "lanes"

    def lane_dir(self, board: str) -> Path:
        return self.lanes / check_name("board", board)

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def log_file(self, board: str, task_id: str) -> Path:
        return self.logs / check_name("board", board) / f"{check_name('task id', task_id)}.log"

    @property
    def worktrees(self) -> Path:
        return self.root / "worktrees"

    def worktree(self, board: str, task_id: str) -> Path:
        return self.worktrees / check_name("board", board) / check_name("task id", task_id)

    @property
    def provider_health(self) -> Path:
        return self.root / "provider-health"

    @property
    def usage(self) -> Path:
        """The usage ledgers, one per board (see ``usage/ledger.py``)."""
        return self.root / "usage"

    def usage_file(self, board: str) -> Path:
        return self.usage / f"{check_name('board', board)}.jsonl"

    @property
    def lock_file(self) -> Path:
        return self.root / "runner.lock"

    @property
    def node_file(self) -> Path:
        return self.root / "node-id"

    @property
    def node_binding_file(self) -> Path:
        """Which home the node id was made for (see ``service/identity.py``)."""
        return self.root / "node-home.json"

    @property
    def config_file(self) -> Path:
        return self.root / "config.toml"

    @property
    def status_file(self) -> Path:
        """The running daemon's status document (see ``service/status.py``)."""
        return self.root / "status.json"

    @property
    def breaker_file(self) -> Path:
        """The storm breaker's trips (see ``service/breaker.py``); survives restarts."""
        return self.root / "breaker.json"

    @property
    def pause_file(self) -> Path:
        """Present while this runner is paused (see ``service/pause.py``); survives restarts."""
        return self.root / "paused.json"

    def ensure(self) -> None:
        """Create the home and its top-level directories (0700) if missing.

        ``files.UnsafePath`` when one of them is a symbolic link or not a directory:
        the runner would otherwise write its state wherever the link points.
        """
        for path in (
            self.root, self.boards, self.lanes, self.logs, self.provider_health, self.usage
        ):
            files.ensure_directory(path)

    def wider_modes(self, worker_user: str | None) -> list[tuple[Path, int, int]]:
        """Each path of the home's own state more open than it should be, as (path, mode,
        wanted): directories 0700 (the home and ``worktrees/`` 0711 with a worker user),
        files 0600, the files a worker reads 0644. Links are skipped: never followed,
        never re-moded. ``doctor`` reports these and ``doctor --fix`` narrows them."""
        found = []
        for path, wanted in self._state_paths(worker_user):
            try:
                st = path.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode):
                continue
            mode = stat.S_IMODE(st.st_mode)
            if mode & ~wanted & 0o077:
                found.append((path, mode, wanted))
        return found

    def _state_paths(self, worker_user: str | None) -> list[tuple[Path, int]]:
        passing = 0o711 if worker_user else files.PRIVATE_DIR
        paths = [(self.root, passing), (self.worktrees, passing)]
        for name in (
            "config.toml",
            "node-id",
            "node-home.json",
            "runner.lock",
            "status.json",
            "paused.json",
        ):
            paths.append((self.root / name, files.PRIVATE_FILE))
        for name in SHARED_FILES:
            paths.append((self.root / name, files.SHARED_FILE))
        for top in (self.boards, self.lanes, self.logs, self.provider_health, self.usage):
            paths.append((top, files.PRIVATE_DIR))
            if top.is_dir() and not top.is_symlink():
                for entry in top.rglob("*"):
                    wanted = files.PRIVATE_DIR if entry.is_dir() else files.PRIVATE_FILE
                    paths.append((entry, wanted))
        return paths

    def unsafe_directories(self) -> list[str]:
        """Each directory of the home that is a link or not a directory, with what it is.

        ``journal verify``, ``status`` and ``doctor`` report these instead of reading
        through them (docs/ARCHITECTURE.md §3.1).
        """
        found = []
        tops = (self.boards, self.lanes, self.logs, self.provider_health, self.worktrees)
        for path in tops:
            found += _not_a_directory(path)
        for parent in (self.lanes, self.logs, self.worktrees):
            if parent.is_dir() and not parent.is_symlink():
                for entry in sorted(parent.iterdir()):
                    found += _not_a_directory(entry)
        return found

    def admit_worker(self) -> None:
        """Let a worker user reach its worktrees and the result schema, by name only.

        The home and ``worktrees/`` become 0711: others may pass through but list
        nothing; every other directory stays 0700 and each worktree belongs to the
        worker (see ``workspace.prepare``).
        """
        self.ensure()
        self.worktrees.mkdir(mode=0o700, exist_ok=True)
        for path in (self.root, self.worktrees):
            path.chmod(0o711)

    def node_id(self) -> str:
        """This runner's stable identity; created once, then read (claims are owned by it).

        The daemon and ``recover`` take it through ``service/identity.py``, which also
        checks that this home is the one it was made for."""
        path = self.node_file
        try:
            return files.read(path, NODE_ID_BYTES).decode("utf-8", "replace").strip()
        except FileNotFoundError:
            pass
        self.ensure()
        temporary = path.with_name(f".node-id.{os.getpid()}")
        files.write(temporary, (fresh_node_id() + "\n").encode())
        try:
            os.link(temporary, path)  # never replaces an identity another process just wrote
        except FileExistsError:
            pass
        finally:
            temporary.unlink()
        return files.read(path, NODE_ID_BYTES).decode("utf-8", "replace").strip()


def fresh_node_id() -> str:
    """A new node id: the machine's name, for people, and 48 random bits, for uniqueness."""
    return f"{os.uname().nodename}-{uuid.uuid4().hex[:12]}"


def _not_a_directory(path: Path) -> list[str]:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return []
    if stat.S_ISDIR(mode):
        return []
    return [f"{path} is a {kind_of(mode)}, not a directory"]
