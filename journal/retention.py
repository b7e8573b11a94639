"""Retention: bound each board's artifacts by age, count and bytes (§4 promise 6).

Collectable: candidates, provider results, committed and conflict records,
staging that no longer carries an accepted result, abandoned temp files,
quarantine diagnostics, and the lane state of a task the caller says is settled
(``settled(board, task_id)``: the journal knows nothing of boards, so whether a
task is finished is the caller's word). Never collected: pending and prepared
records, staging that still carries a valid pending record, any other task's lane
state, and anything this module does not recognise. The decision (``plan``) is pure; removal goes
through identity-safe retirement, so an entry replaced since it was looked at
survives.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from journal import atomic, names
from journal.fs import FS
from journal.lanes import BoardDir, boards, open_board
from journal.pin import pin
from journal.recovery import carries_result, staged_record
from journal.retire import Retirement, retire

log = logging.getLogger(__name__)

_COLLECTABLE = frozenset(
    {
        names.Kind.CANDIDATE,
        names.Kind.PROVIDER_RESULT,
        names.Kind.COMMITTED,
        names.Kind.CONFLICT,
    }
)


@dataclass(frozen=True)
class RetentionPolicy:
    max_age_seconds: float = 30 * 24 * 60 * 60
    max_count: int = 256
    max_bytes: int = 128 * 1024 * 1024


@dataclass(frozen=True)
class Artifact:
    """One collectable entry: where it lives (``""`` board dir or ``quarantine``) and its stat."""

    folder: str
    name: str
    size: int
    mtime: float
    stat: os.stat_result = field(compare=False, repr=False)


@dataclass(frozen=True)
class Removal:
    board: str
    name: str
    reason: str


@dataclass
class CollectReport:
    removed: list[Removal] = field(default_factory=list)
    kept: int = 0
    deferred: list[str] = field(default_factory=list)


def plan(
    artifacts: list[Artifact], now: float, policy: RetentionPolicy
) -> list[tuple[Artifact, str]]:
    """Which artifacts go and why: too old, else beyond the newest ``max_count``/``max_bytes``."""
    doomed: list[tuple[Artifact, str]] = []
    kept_count = kept_bytes = 0
    for artifact in sorted(artifacts, key=lambda a: (a.mtime, a.name), reverse=True):
        if now - artifact.mtime > policy.max_age_seconds:
            doomed.append((artifact, "age"))
        elif kept_count >= policy.max_count:
            doomed.append((artifact, "count"))
        elif kept_bytes + artifact.size > policy.max_bytes:
            doomed.append((artifact, "bytes"))
        else:
            kept_count += 1
            kept_bytes += artifact.size
    return doomed


#: Whether the task ``(board, task_id)`` is settled: its lane state may be collected.
Settled = Callable[[str, str], bool]


def collect(
    fs: FS,
    lanes_root: Path,
    now: float,
    policy: RetentionPolicy,
    settled: Settled | None = None,
) -> CollectReport:
    report = CollectReport()
    for board in boards(fs, lanes_root)[0]:
        try:
            with open_board(fs, lanes_root, board, create=False) as bd:
                _collect_board(bd, now, policy, report, settled)
        except OSError as error:
            log.warning("retention of board %s deferred: %s", board, error)
            report.deferred.append(board)
    return report


def _collect_board(
    bd: BoardDir,
    now: float,
    policy: RetentionPolicy,
    report: CollectReport,
    settled: Settled | None,
) -> None:
    artifacts = list(_board_artifacts(bd, settled))
    quarantine_fd = _open_quarantine(bd)
    try:
        if quarantine_fd is not None:
            artifacts.extend(_quarantine_artifacts(bd.fs, quarantine_fd))
        doomed = plan(artifacts, now, policy)
        for artifact, reason in doomed:
            dir_fd = bd.fd if not artifact.folder else quarantine_fd
            assert dir_fd is not None
            if retire(bd.fs, dir_fd, artifact.name, artifact.stat) is Retirement.RETIRED:
                shown = f"{artifact.folder}/{artifact.name}" if artifact.folder else artifact.name
                report.removed.append(Removal(bd.board, names.printable(shown), reason))
        report.kept += len(artifacts) - len(doomed)
    finally:
        if quarantine_fd is not None:
            bd.fs.close(quarantine_fd)


def _artifact(fs: FS, dir_fd: int, folder: str, name: str) -> Artifact | None:
    try:
        seen = fs.lstat(dir_fd, name)
    except FileNotFoundError:
        return None
    return Artifact(folder, name, seen.st_size, seen.st_mtime, seen)


def _board_artifacts(bd: BoardDir, settled: Settled | None) -> list[Artifact]:
    found: list[Artifact] = []
    for name in bd.fs.listdir(bd.fd):
        entry = names.parse(name)
        if entry.kind is names.Kind.STAGING and _carries_result(bd, entry):
            continue
        collectable = (
            entry.kind in _COLLECTABLE
            or entry.kind is names.Kind.STAGING
            or atomic.is_abandoned(entry)
            or _settled_lane(bd.board, entry, settled)
        )
        if collectable and (artifact := _artifact(bd.fs, bd.fd, "", name)) is not None:
            found.append(artifact)
    return found


def _settled_lane(board: str, entry: names.EntryName, settled: Settled | None) -> bool:
    """A lane state whose task the caller says is settled."""
    return (
        settled is not None
        and entry.kind is names.Kind.LANE_STATE
        and entry.task_id is not None
        and settled(board, entry.task_id)
    )


def _carries_result(bd: BoardDir, entry: names.EntryName) -> bool:
    pinned = pin(bd.fs, bd.fd, entry.name)
    if pinned is None:
        return False
    with pinned:
        if pinned.payload is None:
            return False
        record = staged_record(bd.board, entry, pinned.payload)
        return record is not None and carries_result(record)


def _open_quarantine(bd: BoardDir) -> int | None:
    try:
        return bd.fs.open_dir(bd.fd, names.QUARANTINE_DIR)
    except FileNotFoundError:
        return None
    except OSError as error:
        # Not a directory (or a symlink): nothing of ours to collect in there.
        log.warning("board %s: quarantine is not a directory (%s); skipped", bd.board, error)
        return None


def _quarantine_artifacts(fs: FS, quarantine_fd: int) -> list[Artifact]:
    found: list[Artifact] = []
    for name in fs.listdir(quarantine_fd):
        artifact = _artifact(fs, quarantine_fd, names.QUARANTINE_DIR, name)
        if (
            artifact is not None
            and name.endswith(".quarantine")
            and stat.S_ISREG(artifact.stat.st_mode)
        ):
            found.append(artifact)
    return found
