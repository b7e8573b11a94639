"""The commit protocol (§4.1) and the promises of §4, including the races."""

from __future__ import annotations

import errno
import multiprocessing
import os
import threading
from pathlib import Path

import orjson
import pytest
from doubles import SqliteBoard, Stop, pending_kwargs

import schemas
from journal import (
    CommitResult,
    Document,
    FinalizeOutcome,
    Journal,
    LinuxFS,
    PendingConflict,
)
from journal import names as journal_names
from journal.lanes import open_board
from journal.pin import pin
from journal.retire import Retirement, retire


def listing(lanes: Path) -> list[str]:
    return sorted(os.listdir(lanes / "b1"))


def test_write_pending_is_private_idempotent_and_no_replace(journal: Journal, lanes: Path) -> None:
    path = journal.write_pending(**pending_kwargs())
    assert path == lanes / "b1" / "t1.run-7.terminal.pending.json"
    assert (os.stat(lanes / "b1").st_mode & 0o777, os.stat(path).st_mode & 0o777) == (0o700, 0o600)
    document = orjson.loads(path.read_bytes())
    assert schemas.first_error("terminal-record.schema.json", document) is None
    assert journal.write_pending(**pending_kwargs()) == path
    with pytest.raises(PendingConflict):
        journal.write_pending(**pending_kwargs(summary="another answer"))
    assert orjson.loads(path.read_bytes())["summary"] == "did it"


def test_finalize_commits_once_and_leaves_only_the_committed_record(
    journal: Journal, board: SqliteBoard, lanes: Path
) -> None:
    board.start("t1", 7)
    journal.write_pending(**pending_kwargs())
    assert journal.has_pending("b1", "t1", 7)
    assert journal.finalize("b1", "t1", 7, board.commit) is FinalizeOutcome.COMMITTED
    assert listing(lanes) == ["t1.run-7.terminal.committed.json"]
    committed = orjson.loads((lanes / "b1" / "t1.run-7.terminal.committed.json").read_bytes())
    assert committed["state"] == "committed" and "committed_at" in committed
    assert not journal.has_pending("b1", "t1", 7)
    assert journal.finalize("b1", "t1", 7, board.commit) is FinalizeOutcome.ABSENT
    assert len(board.completions()) == 1


def test_stale_result_is_kept_in_full_as_a_conflict_record(
    journal: Journal, board: SqliteBoard, lanes: Path
) -> None:
    journal.write_pending(**pending_kwargs())
    assert journal.finalize("b1", "t1", 7, board.commit) is FinalizeOutcome.CONFLICT
    [name] = listing(lanes)
    entry = journal_names.parse(name)
    assert entry.kind is journal_names.Kind.CONFLICT
    document = orjson.loads((lanes / "b1" / name).read_bytes())
    assert document["result"] == pending_kwargs()["result"] and document["conflict_reason"]
    assert board.completions() == []


@pytest.mark.parametrize("answer", ["pending", "raises"])
def test_transient_board_answer_changes_nothing_but_prepared_evidence(
    journal: Journal, board: SqliteBoard, lanes: Path, answer: str
) -> None:
    board.start("t1", 7)
    journal.write_pending(**pending_kwargs())

    def transient(record: object) -> CommitResult:
        if answer == "raises":
            raise Stop("board unreachable")
        return CommitResult.PENDING

    assert journal.finalize("b1", "t1", 7, transient) is FinalizeOutcome.PENDING
    kinds = [journal_names.parse(name).kind for name in listing(lanes)]
    assert sorted(kinds) == [journal_names.Kind.PENDING, journal_names.Kind.PREPARED]
    assert journal.has_pending("b1", "t1", 7)


def test_prepared_left_by_a_crash_is_committed_once_on_replay(
    journal: Journal, board: SqliteBoard, lanes: Path
) -> None:
    """The board took the result, then the runner died before recording it."""
    board.start("t1", 7)
    journal.write_pending(**pending_kwargs())

    def commit_then_die(record: object) -> CommitResult:
        board.commit(record)  # type: ignore[arg-type]
        raise Stop("crashed after the board commit")

    assert journal.finalize("b1", "t1", 7, commit_then_die) is FinalizeOutcome.PENDING
    report = journal.recover(board.commit, board.make_retryable)
    assert [e.action for e in report.events] == ["committed", "committed"]
    assert listing(lanes) == ["t1.run-7.terminal.committed.json"]
    assert len(board.completions()) == 1
    assert journal.recover(board.commit, board.make_retryable).events == []


def test_authority_comes_from_the_path(journal: Journal, board: SqliteBoard, lanes: Path) -> None:
    """A valid record copied under another run's name is quarantined, never committed."""
    board.start("t1", 7)
    board.start("t1", 8)
    source = journal.write_pending(**pending_kwargs())
    foreign = lanes / "b1" / "t1.run-8.terminal.pending.json"
    foreign.write_bytes(source.read_bytes())
    os.unlink(source)
    assert journal.finalize("b1", "t1", 8, board.commit) is FinalizeOutcome.INVALID
    report = journal.recover(board.commit, board.make_retryable)
    assert [(e.action, e.reason) for e in report.events] == [("quarantined", "foreign-identity")]
    assert board.completions() == []
    assert board.retries() == [("b1", "t1", 8, "foreign-identity")]


def test_evidence_another_writer_is_placing_by_link_and_unlink_is_waited_for(
    journal: Journal, board: SqliteBoard, lanes: Path
) -> None:
    """Where rename-no-replace is ``link`` + ``unlink``, the evidence another finalizer is
    placing has two links for a moment: the finalizer waits for it to settle rather than
    leave its record pending. Catches: pinning once (the flake of the two finalizer
    threads on the link fallback: one answered ``pending``)."""
    board.start("t1", 7)
    journal.write_pending(**pending_kwargs())

    def commit_then_die(record: object) -> CommitResult:
        raise Stop("crashed before the board commit")

    assert journal.finalize("b1", "t1", 7, commit_then_die) is FinalizeOutcome.PENDING
    (prepared,) = (lanes / "b1").glob("*.prepared-*")
    other = prepared.with_name(".being-placed-by-another")
    os.link(prepared, other)  # the other writer's link, its unlink a moment away
    settled = threading.Timer(0.02, other.unlink)
    settled.start()
    try:
        outcome = journal.finalize("b1", "t1", 7, board.commit)  # type: ignore[arg-type]
    finally:
        settled.join()
    assert outcome is FinalizeOutcome.COMMITTED
    assert len(board.completions()) == 1


def test_two_finalizer_threads_complete_the_board_once(
    journal: Journal, board: SqliteBoard, lanes: Path
) -> None:
    board.start("t1", 7)
    journal.write_pending(**pending_kwargs())
    both_prepared = threading.Barrier(2)
    outcomes: list[FinalizeOutcome] = []

    def commit(record: object) -> CommitResult:
        both_prepared.wait(timeout=30)
        return board.commit(record)  # type: ignore[arg-type]

    def run() -> None:
        outcomes.append(journal.finalize("b1", "t1", 7, commit))

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes == [FinalizeOutcome.COMMITTED] * 2
    assert len(board.completions()) == 1
    assert listing(lanes) == ["t1.run-7.terminal.committed.json"]


def _finalize_in_child(lanes: Path, db: Path, fallback: bool, barrier: object) -> None:
    board = SqliteBoard(db)

    def commit(record: object) -> CommitResult:
        barrier.wait(timeout=30)  # type: ignore[attr-defined]
        return board.commit(record)  # type: ignore[arg-type]

    outcome = Journal(lanes, LinuxFS(force_link_fallback=fallback)).finalize("b1", "t1", 7, commit)
    os._exit(0 if outcome is FinalizeOutcome.COMMITTED else 1)


def test_two_finalizer_processes_complete_the_board_once(
    journal: Journal, board: SqliteBoard, lanes: Path, fallback: bool
) -> None:
    board.start("t1", 7)
    journal.write_pending(**pending_kwargs())
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(2)
    children = [
        context.Process(target=_finalize_in_child, args=(lanes, board.path, fallback, barrier))
        for _ in range(2)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
    assert [child.exitcode for child in children] == [0, 0]
    assert len(board.completions()) == 1
    assert listing(lanes) == ["t1.run-7.terminal.committed.json"]


class ReplacingFS(LinuxFS):
    """Lets a writer replace the pending file at the worst moment of retirement."""

    def __init__(self, *, force_link_fallback: bool, writers: int) -> None:
        super().__init__(force_link_fallback=force_link_fallback)
        self.writers = writers

    def rename_noreplace(self, dir_fd: int, source: str, target_dir_fd: int, target: str) -> None:
        moving_aside = source.endswith(".pending.json") and target.startswith(".retire.")
        putting_back = source.startswith(".retire.")
        if (moving_aside or putting_back) and self.writers:
            self.writers -= 1
            _write_replacement(dir_fd, source, target if putting_back else source)
        super().rename_noreplace(dir_fd, source, target_dir_fd, target)


def _write_replacement(dir_fd: int, model: str, name: str) -> None:
    fd = os.open(model, os.O_RDONLY, dir_fd=dir_fd)
    replacement = orjson.loads(os.read(fd, 1 << 20))
    os.close(fd)
    replacement["summary"] = f"a different accepted answer {os.urandom(4).hex()}"
    replacement["result"]["summary"] = replacement["summary"]
    fd = os.open(".writer", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600, dir_fd=dir_fd)
    os.write(fd, orjson.dumps(replacement))
    os.close(fd)
    os.rename(".writer", name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def test_a_replacement_written_during_retirement_survives(
    lanes: Path, board: SqliteBoard, fallback: bool
) -> None:
    board.start("t1", 7)
    journal = Journal(lanes, ReplacingFS(force_link_fallback=fallback, writers=1))
    journal.write_pending(**pending_kwargs())
    assert journal.finalize("b1", "t1", 7, board.commit) is FinalizeOutcome.COMMITTED
    survivor = orjson.loads((lanes / "b1" / "t1.run-7.terminal.pending.json").read_bytes())
    assert survivor["summary"].startswith("a different accepted answer")
    assert [journal_names.parse(n).kind for n in listing(lanes)] == [
        journal_names.Kind.COMMITTED,
        journal_names.Kind.PENDING,
    ]
    # The replacement is a different result for an already completed run: kept as a conflict.
    report = journal.recover(board.commit, board.make_retryable)
    assert [e.action for e in report.events] == ["conflict"]
    assert len(board.completions()) == 1


def test_a_replacement_stranded_in_staging_is_promoted_by_recovery(
    lanes: Path, board: SqliteBoard, fallback: bool
) -> None:
    """Writer 1 replaces the pending name; while it is put back, writer 2 takes the name."""
    board.start("t1", 7)
    fs = ReplacingFS(force_link_fallback=fallback, writers=0)
    journal = Journal(lanes, fs)
    journal.write_pending(**pending_kwargs())
    with open_board(fs, lanes, "b1", create=False) as bd:
        pinned = pin(fs, bd.fd, "t1.run-7.terminal.pending.json")
        assert pinned is not None
        with pinned:
            fs.writers = 2
            assert retire(fs, bd.fd, pinned.name, pinned.stat) is Retirement.STRANDED
    kinds = sorted(journal_names.parse(n).kind for n in listing(lanes))
    assert kinds == [journal_names.Kind.PENDING, journal_names.Kind.STAGING]
    assert journal.has_pending("b1", "t1", 7)
    report = journal.recover(board.commit, board.make_retryable)
    assert [e.action for e in report.events][0] == "promoted"
    assert len(board.completions()) == 1
    assert [journal_names.parse(n).kind for n in listing(lanes)] == [
        journal_names.Kind.COMMITTED,
        journal_names.Kind.CONFLICT,
    ]


def test_documents_are_replaced_atomically_and_candidates_never(
    journal: Journal, lanes: Path
) -> None:
    journal.write_documents("b1", [Document("t1.json", {"run_id": 1})])
    journal.write_documents("b1", [Document("t1.json", {"run_id": 2})])
    assert orjson.loads((lanes / "b1" / "t1.json").read_bytes()) == {"run_id": 2}
    journal.write_documents("b1", [Document("t1.run-2.candidate-1.json", {"a": 1}, new=True)])
    with pytest.raises(FileExistsError):
        journal.write_documents(
            "b1",
            [
                Document("t1.json", {"run_id": 3}),
                Document("t1.run-2.candidate-1.json", {"a": 2}, new=True),
            ],
        )
    assert orjson.loads((lanes / "b1" / "t1.json").read_bytes()) == {"run_id": 3}
    assert orjson.loads((lanes / "b1" / "t1.run-2.candidate-1.json").read_bytes()) == {"a": 1}
    with pytest.raises(ValueError, match="not a lane state"):
        journal.write_documents("b1", [Document("t1.run-2.terminal.pending.json", {})])
    assert [n for n in listing(lanes) if n.startswith(".tmp.")] == []


class FsyncCounter(LinuxFS):
    fsyncs = 0

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        super().fsync(fd)


def test_documents_written_together_cost_one_directory_fsync(tmp_path: Path) -> None:
    fs = FsyncCounter()
    journal = Journal(tmp_path / "lanes", fs)
    journal.write_documents("b1", [Document("t1.json", {"run_id": 1})])  # creates the board
    before = fs.fsyncs
    journal.write_documents(
        "b1", [Document("t1.json", {"run_id": 2}), Document("t1.run-2.candidate-1.json", {}, True)]
    )
    assert fs.fsyncs - before == 3  # two files' data, one directory


def test_noreplace_method_is_reported(journal: Journal, fallback: bool) -> None:
    assert journal.noreplace_method("b1") == ("link+unlink" if fallback else "renameat2")


def test_new_records_are_written_unnamed_and_leave_no_temporary_name(tmp_path: Path) -> None:
    """The default path on ext4: the ``.tmp.`` name is never even created."""
    fs = OpLog()
    Journal(tmp_path / "lanes", fs).write_pending(**pending_kwargs())
    assert "create_unnamed" in fs.log and "create" not in fs.log


def test_without_unnamed_files_records_get_temporary_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A filesystem without O_TMPFILE (no such filesystem can be mounted here, so
    ``os.open`` answers as one would) falls back once, for good, to named temp files."""
    real_open = os.open
    refusals = []

    def no_tmpfile(path: str, flags: int, *args: object, **kwargs: object) -> int:
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            refusals.append(path)
            raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", no_tmpfile)
    fs = OpLog()
    journal = Journal(tmp_path / "lanes", fs)
    journal.write_pending(**pending_kwargs(run_id=1))
    journal.write_pending(**pending_kwargs(run_id=2))
    assert len(refusals) == 1 and fs.log.count("create") == 2
    assert journal.has_pending("b1", "t1", 1) and journal.has_pending("b1", "t1", 2)


class OpLog(LinuxFS):
    """Records which of the two ways of creating a record was taken."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[str] = []

    def create(self, dir_fd: int, name: str) -> int:
        self.log.append("create")
        return super().create(dir_fd, name)

    def create_unnamed(self, dir_fd: int) -> int | None:
        fd = super().create_unnamed(dir_fd)
        self.log.append("create_unnamed" if fd is not None else "no unnamed files")
        return fd


UNFINISHED = [
    ({"status": "incomplete"}, "did it", "status is 'incomplete'", "not-terminal"),
    ({"status": "blocked", "blockers": ["a key"]}, "did it", "status is 'blocked'", "not-terminal"),
    ({"blockers": ["a key"]}, "did it", "blockers", "schema-invalid"),  # the schema says so too
    ({"summary": "   "}, "   ", "summary is blank", "not-terminal"),
    ({}, "a different summary", "summary differs", "not-terminal"),
]


@pytest.mark.parametrize(("change", "summary", "why", "reason"), UNFINISHED)
def test_a_record_of_unfinished_work_is_refused_and_quarantined_never_committed(
    journal: Journal,
    board: SqliteBoard,
    lanes: Path,
    change: dict,
    summary: str,
    why: str,
    reason: str,
) -> None:
    """Only a finished answer may reach the board as done, whoever wrote the record."""
    from journal.record import TerminalRecord

    kwargs = pending_kwargs()
    kwargs["result"] = kwargs["result"] | change
    kwargs["summary"] = summary
    with pytest.raises(ValueError, match=why):
        journal.write_pending(**kwargs)
    planted = TerminalRecord("b1", "t1", 7, kwargs["result"], summary, {})
    (lanes / "b1").mkdir(mode=0o700, parents=True, exist_ok=True)
    (lanes / "b1" / journal_names.pending("t1", 7)).write_bytes(planted.to_bytes())
    board.start("t1", 7)
    [entry] = [e for e in journal.entries("b1") if e.kind == "pending"]
    assert (entry.valid, entry.reason) == (False, reason)
    report = journal.recover(board.commit, board.make_retryable)
    assert board.completions() == []
    [diagnostic] = (lanes / "b1" / "quarantine").iterdir()
    assert f".{reason}." in diagnostic.name
    assert orjson.loads(diagnostic.read_bytes())["reason"] == reason
    assert [event.name for event in report.of("quarantined")] == [journal_names.pending("t1", 7)]
