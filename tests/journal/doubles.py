"""Test doubles for the journal: an exact-run SQLite board and filesystems that fail.

``FaultyFS`` fails the Nth operation with an errno; ``KillFS`` SIGKILLs its own
process at operation N; ``CrashFS`` simulates power loss at operation N by
rebuilding the directory tree from what was fsynced (``drop``), with every
directory change kept but unsynced file data torn in half (``tear``), or with
unsynced removals kept but unsynced additions lost (``reorder``): POSIX orders
nothing between directory changes no fsync separated, and this is the worst
subset for "nothing lost" (a rename there leaves neither name).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
from pathlib import Path
from typing import Any

from journal import CommitResult, LinuxFS, TerminalRecord

RESULT = {
    "status": "completed",
    "summary": "did it",
    "changed_files": ["a.py"],
    "tests_run": ["pytest"],
    "artifacts": [],
    "findings": [],
    "blockers": [],
}


class SqliteBoard:
    """A tiny exact-run board in a SQLite file (usable from several processes).

    ``commit`` follows docs/ARCHITECTURE.md §5: the current running run completes once; the same
    run with the same result again is a duplicate (committed); anything else is stale.
    Every call and every retry request is recorded so tests can count them.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        with self._connect() as db:
            db.executescript(
                "CREATE TABLE IF NOT EXISTS runs (task_id TEXT, run_id INTEGER, running INTEGER);"
                "CREATE TABLE IF NOT EXISTS completions (task_id TEXT, run_id INTEGER, digest TEXT);"  # noqa: E501
                "CREATE TABLE IF NOT EXISTS calls (task_id TEXT, run_id INTEGER, answer TEXT);"
                "CREATE TABLE IF NOT EXISTS retries (board TEXT, task_id TEXT, run_id INTEGER,"
                " reason TEXT);"
            )

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        return db

    def start(self, task_id: str, run_id: int) -> None:
        with self._connect() as db:
            db.execute("INSERT INTO runs VALUES (?, ?, 1)", (task_id, run_id))

    def commit(self, record: TerminalRecord) -> CommitResult:
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            key = (record.task_id, record.run_id)
            done = [
                row[0]
                for row in db.execute(
                    "SELECT digest FROM completions WHERE task_id=? AND run_id=?", key
                )
            ]
            running = db.execute(
                "SELECT 1 FROM runs WHERE task_id=? AND run_id=? AND running=1", key
            ).fetchone()
            if done:
                answer = CommitResult.COMMITTED if record.digest in done else CommitResult.STALE
            elif running:
                db.execute("INSERT INTO completions VALUES (?, ?, ?)", (*key, record.digest))
                db.execute("UPDATE runs SET running=0 WHERE task_id=? AND run_id=?", key)
                answer = CommitResult.COMMITTED
            else:
                answer = CommitResult.STALE
            db.execute("INSERT INTO calls VALUES (?, ?, ?)", (*key, str(answer)))
            db.execute("COMMIT")
            return answer
        finally:
            db.close()

    def make_retryable(self, board: str, task_id: str, run_id: int, reason: str) -> None:
        with self._connect() as db:
            db.execute("INSERT INTO retries VALUES (?, ?, ?, ?)", (board, task_id, run_id, reason))

    def completions(self) -> list[tuple[str, int, str]]:
        with self._connect() as db:
            return list(db.execute("SELECT task_id, run_id, digest FROM completions"))

    def retries(self) -> list[tuple[str, str, int, str]]:
        with self._connect() as db:
            return list(db.execute("SELECT * FROM retries"))


class Stop(Exception):
    """Raised by the doubles' commit callbacks to model a board error."""


class CountingFS(LinuxFS):
    """Counts operations; subclasses act at operation ``at``. ``close`` is never counted."""

    def __init__(self, at: int, *, force_link_fallback: bool = False) -> None:
        super().__init__(force_link_fallback=force_link_fallback)
        self.at = at
        self.ops = 0
        self.fired = False

    def step(self, op: str) -> None:
        self.ops += 1
        if self.ops == self.at:
            self.fired = True
            self.fire(op)

    def fire(self, op: str) -> None:
        raise NotImplementedError

    def open_root(self, path: Path) -> int:
        self.step("open_root")
        return super().open_root(path)

    def open_dir(self, dir_fd: int, name: str) -> int:
        self.step("open_dir")
        return super().open_dir(dir_fd, name)

    def open_read(self, dir_fd: int, name: str) -> int:
        self.step("open_read")
        return super().open_read(dir_fd, name)

    def create(self, dir_fd: int, name: str) -> int:
        self.step("create")
        return super().create(dir_fd, name)

    def create_unnamed(self, dir_fd: int) -> int | None:
        self.step("create_unnamed")
        return super().create_unnamed(dir_fd)

    def link_unnamed(self, fd: int, dir_fd: int, name: str) -> None:
        self.step("link_unnamed")
        super().link_unnamed(fd, dir_fd, name)

    def mkdir(self, dir_fd: int, name: str) -> None:
        self.step("mkdir")
        super().mkdir(dir_fd, name)

    def lstat(self, dir_fd: int, name: str) -> os.stat_result:
        self.step("lstat")
        return super().lstat(dir_fd, name)

    def fstat(self, fd: int) -> os.stat_result:
        self.step("fstat")
        return super().fstat(fd)

    def read(self, fd: int, size: int) -> bytes:
        self.step("read")
        return super().read(fd, size)

    def write(self, fd: int, data: bytes) -> int:
        self.step("write")
        return super().write(fd, data)

    def fsync(self, fd: int) -> None:
        self.step("fsync")
        super().fsync(fd)

    def listdir(self, dir_fd: int) -> list[str]:
        self.step("listdir")
        return super().listdir(dir_fd)

    def rename(self, dir_fd: int, source: str, target: str) -> None:
        self.step("rename")
        super().rename(dir_fd, source, target)

    def rename_noreplace(self, dir_fd: int, source: str, target_dir_fd: int, target: str) -> None:
        self.step("rename_noreplace")
        super().rename_noreplace(dir_fd, source, target_dir_fd, target)

    def unlink(self, dir_fd: int, name: str) -> None:
        self.step("unlink")
        super().unlink(dir_fd, name)


class FaultyFS(CountingFS):
    def __init__(self, at: int, code: int, *, force_link_fallback: bool = False) -> None:
        super().__init__(at, force_link_fallback=force_link_fallback)
        self.code = code

    def fire(self, op: str) -> None:
        raise OSError(self.code, f"{os.strerror(self.code)} (injected at {op} #{self.ops})")


class KillFS(CountingFS):
    def fire(self, op: str) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


class PowerLoss(BaseException):
    """Not an Exception: nothing in the journal may catch the lights going out."""


class CrashFS(CountingFS):
    """Power loss at operation N: only what was fsynced survives (see module docstring).

    Every inode that was ever fsynced or listed by a directory fsync is kept open,
    so its number cannot be reused and its durable bytes stay attributable.
    """

    MODES = ("drop", "tear", "reorder")

    def __init__(self, root: Path, at: int, *, mode: str, force_link_fallback: bool = False):
        super().__init__(at, force_link_fallback=force_link_fallback)
        assert mode in self.MODES
        self.root = root.resolve()
        self.tear = mode == "tear"
        self.reorder = mode == "reorder"
        self.durable_dirs: dict[str, dict[str, tuple[int, bool]]] = {}
        self.durable_data: dict[int, bytes] = {}
        self.mtimes: dict[int, int] = {}
        self.held: dict[int, int] = {}
        for folder, _dirs, _files in os.walk(self.root):
            self._sync_dir(folder)
            for name, (ino, is_dir) in self.durable_dirs[folder].items():
                if not is_dir:
                    self.durable_data[ino] = (Path(folder) / name).read_bytes()

    def fire(self, op: str) -> None:
        raise PowerLoss(op)

    def _hold(self, path: str, ino: int) -> None:
        """Keep the inode open; ``path`` is a real entry or a ``/proc/self/fd`` magic link."""
        if ino not in self.held:
            self.held[ino] = os.open(path, os.O_RDONLY)

    def _sync_dir(self, folder: str) -> None:
        listing: dict[str, tuple[int, bool]] = {}
        for entry in os.scandir(folder):
            info = entry.stat(follow_symlinks=False)
            listing[entry.name] = (info.st_ino, stat.S_ISDIR(info.st_mode))
            if stat.S_ISREG(info.st_mode):
                self._hold(entry.path, info.st_ino)
                self.mtimes[info.st_ino] = info.st_mtime_ns
        self.durable_dirs[folder] = listing

    def fsync(self, fd: int) -> None:
        super().fsync(fd)
        path = os.readlink(f"/proc/self/fd/{fd}")
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            self._sync_dir(path)
        else:
            self._hold(f"/proc/self/fd/{fd}", info.st_ino)
            self.durable_data[info.st_ino] = os.pread(self.held[info.st_ino], info.st_size, 0)
            self.mtimes[info.st_ino] = info.st_mtime_ns

    def restore(self) -> None:
        """Replace the tree under ``root`` with what survives the power loss."""
        rebuilt = self.root.with_name(self.root.name + ".after-power-loss")
        self._rebuild(str(self.root), rebuilt)
        for fd in self.held.values():
            os.close(fd)
        self.held.clear()
        _remove_tree(self.root)
        os.rename(rebuilt, self.root)

    def _rebuild(self, folder: str, target: Path) -> None:
        target.mkdir(mode=0o700)
        current = {e.name: (e.inode(), e.is_dir(follow_symlinks=False)) for e in os.scandir(folder)}
        durable = self.durable_dirs.get(folder, {})
        if self.tear:
            listing = current
        elif self.reorder:
            listing = {name: entry for name, entry in durable.items() if name in current}
        else:
            listing = durable
        for name, (ino, is_dir) in listing.items():
            if is_dir:
                self._rebuild(os.path.join(folder, name), target / name)
                continue
            (target / name).write_bytes(self._content(os.path.join(folder, name), ino))
            os.chmod(target / name, 0o600)
            if ino in self.mtimes:
                os.utime(target / name, ns=(self.mtimes[ino], self.mtimes[ino]))

    def _content(self, path: str, ino: int) -> bytes:
        durable = self.durable_data.get(ino, b"")
        if not self.tear:
            return durable
        current = Path(path).read_bytes()
        return current if current == durable else current[: len(current) // 2]


def _remove_tree(root: Path) -> None:
    for folder, dirs, files in os.walk(root, topdown=False):
        for name in files:
            os.unlink(os.path.join(folder, name))
        for name in dirs:
            path = os.path.join(folder, name)
            (os.unlink if os.path.islink(path) else os.rmdir)(path)
    os.rmdir(root)


def pending_kwargs(task_id: str = "t1", run_id: int = 7, **overrides: Any) -> dict[str, Any]:
    """Arguments for ``Journal.write_pending`` (board ``b1``)."""
    summary = overrides.pop("summary", RESULT["summary"])
    return {
        "board": "b1",
        "task_id": task_id,
        "run_id": run_id,
        "result": dict(RESULT, summary=summary),  # a record's summary is its result's
        "summary": summary,
        "metadata": {"attempt": 1},
    } | overrides
