"""Proof by fault injection: I/O errors, SIGKILL and power loss at every operation.

Each test starts from a template state (pending records durable, the board's
runs started), breaks the Nth filesystem operation for N = 1, 2, ... until the
run completes untouched, then recovers with a healthy filesystem and checks
§4 promises 1-4: every accepted result is on the board exactly once for its own
run, nothing is left pending, and the lane state next to it is untouched.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from doubles import CountingFS, CrashFS, FaultyFS, KillFS, PowerLoss, SqliteBoard, pending_kwargs

from journal import CommitResult, Document, Journal, LinuxFS
from journal import names as journal_names
from journal.record import decode

MAX_STEPS = 400
LANE_STATE = {"run_id": 9, "sessions": ["abc"]}


class Scenario:
    """A template lanes directory and board, copied fresh for every N."""

    def __init__(self, template: Path, runs: dict[int, str]) -> None:
        """``runs``: run id → how it is left: pending, prepared (+pending) or staged."""
        self.template = template
        self.runs = runs
        self.digests: dict[tuple[str, int], str] = {}
        board = SqliteBoard(template / "board.db")
        journal = Journal(template / "lanes")
        journal.write_documents("b1", [Document("t1.json", LANE_STATE)])
        for run_id, left_as in runs.items():
            board.start("t1", run_id)
            path = journal.write_pending(**pending_kwargs(run_id=run_id, summary=f"run {run_id}"))
            self.digests[("t1", run_id)] = decode(path.read_bytes()).digest
            if left_as == "prepared":
                journal.finalize("b1", "t1", run_id, lambda record: CommitResult.PENDING)
            if left_as == "staged":
                seen = os.stat(path)
                staged = journal_names.staging(path.name, seen.st_dev, seen.st_ino, 0)
                os.rename(path, path.with_name(staged))

    def copy(self, where: Path) -> tuple[Path, SqliteBoard]:
        shutil.copytree(self.template, where, copy_function=shutil.copy2)
        return where / "lanes", SqliteBoard(where / "board.db")


#: Recovery as a restarted runner does it: a new interpreter sharing nothing with the
#: one that was killed but the files and the board. Prints what it had to set aside.
FRESH_RECOVERY = """
import json, sys
from pathlib import Path
from doubles import SqliteBoard
from journal import Journal
board = SqliteBoard(Path(sys.argv[2]))
report = Journal(Path(sys.argv[1])).recover(board.commit, board.make_retryable)
print(json.dumps([event.action for event in report.events]))
"""


def recover_in_place(lanes: Path, board: SqliteBoard) -> list[str]:
    report = Journal(lanes).recover(board.commit, board.make_retryable)
    return [event.action for event in report.events]


def recover_in_a_fresh_interpreter(lanes: Path, board: SqliteBoard) -> list[str]:
    here = Path(__file__).parent
    done = subprocess.run(
        [sys.executable, "-c", FRESH_RECOVERY, str(lanes), str(board.path)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(here), str(here.parent.parent)])},
        capture_output=True,
        text=True,
        check=True,
    )
    actions: list[str] = json.loads(done.stdout)
    return actions


def check_promises(
    scenario: Scenario,
    lanes: Path,
    board: SqliteBoard,
    recover: Callable[[Path, SqliteBoard], list[str]] = recover_in_place,
) -> None:
    actions = recover(lanes, board)
    assert "quarantined" not in actions and "deferred" not in actions, actions
    healthy = Journal(lanes)
    expected = sorted((task, run, digest) for (task, run), digest in scenario.digests.items())
    assert sorted(board.completions()) == expected, "lost or double-committed"
    left = sorted(os.listdir(lanes / "b1"))
    committed = sorted(journal_names.committed(task, run) for task, run in scenario.digests)
    assert left == sorted([*committed, "t1.json"]), left
    for task, run in scenario.digests:
        path = lanes / "b1" / journal_names.committed(task, run)
        assert decode(path.read_bytes()).digest == scenario.digests[(task, run)]
    lane_state = (lanes / "b1" / "t1.json").read_bytes()
    assert lane_state == (scenario.template / "lanes" / "b1" / "t1.json").read_bytes()
    assert all(entry.valid for entry in healthy.entries("b1"))


def every_step(
    tmp_path: Path,
    scenario: Scenario,
    make_fs: Callable[[int, Path], CountingFS],
    act: Callable[[Journal, SqliteBoard], None],
    after: Callable[[CountingFS], None] = lambda fs: None,
) -> int:
    """Run ``act`` with the Nth operation broken, for every N; returns the steps needed."""
    for step in itertools.count(1):
        assert step < MAX_STEPS
        lanes, board = scenario.copy(tmp_path / f"step-{step}")
        fs = make_fs(step, lanes)
        # Only the power-loss double raises here; the journal itself never does.
        with contextlib.suppress(PowerLoss):
            act(Journal(lanes, fs), board)
        after(fs)
        check_promises(scenario, lanes, board)
        if not fs.fired:
            return step
    raise AssertionError("unreachable")


def finalize_run_7(journal: Journal, board: SqliteBoard) -> None:
    journal.finalize("b1", "t1", 7, board.commit)


def recover_all(journal: Journal, board: SqliteBoard) -> None:
    journal.recover(board.commit, board.make_retryable)


@pytest.fixture(scope="module")
def commit_scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    return Scenario(tmp_path_factory.mktemp("commit-template"), {7: "pending"})


@pytest.fixture(scope="module")
def recovery_scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    runs = {7: "pending", 8: "prepared", 9: "staged", 10: "pending", 11: "pending"}
    return Scenario(tmp_path_factory.mktemp("recovery-template"), runs)


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC], ids=["EIO", "ENOSPC"])
def test_io_error_at_every_operation_of_a_commit(
    tmp_path: Path, commit_scenario: Scenario, fallback: bool, code: int
) -> None:
    steps = every_step(
        tmp_path,
        commit_scenario,
        lambda n, _: FaultyFS(n, code, force_link_fallback=fallback),
        finalize_run_7,
    )
    assert steps > 20


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC], ids=["EIO", "ENOSPC"])
def test_io_error_at_every_operation_of_a_recovery(
    tmp_path: Path, recovery_scenario: Scenario, fallback: bool, code: int
) -> None:
    """Recovery itself never raises, whichever operation fails."""
    steps = every_step(
        tmp_path,
        recovery_scenario,
        lambda n, _: FaultyFS(n, code, force_link_fallback=fallback),
        recover_all,
    )
    assert steps > 50


@pytest.mark.parametrize("mode", CrashFS.MODES, ids=[f"{mode}-unsynced" for mode in CrashFS.MODES])
@pytest.mark.parametrize("act", [finalize_run_7, recover_all], ids=["commit", "recovery"])
def test_power_loss_at_every_operation(
    tmp_path: Path,
    commit_scenario: Scenario,
    recovery_scenario: Scenario,
    fallback: bool,
    mode: str,
    act: Callable[[Journal, SqliteBoard], None],
) -> None:
    scenario = commit_scenario if act is finalize_run_7 else recovery_scenario
    every_step(
        tmp_path,
        scenario,
        lambda n, lanes: CrashFS(lanes, n, mode=mode, force_link_fallback=fallback),
        act,
        # The last round runs to completion and then loses power: what finalize or
        # recovery left unsynced (the retirements) must be harmless too.
        after=lambda fs: fs.restore(),  # type: ignore[attr-defined]
    )


def test_sigkill_at_every_operation_of_a_commit(
    tmp_path: Path, commit_scenario: Scenario, fallback: bool
) -> None:
    """The commit runs in a child process that SIGKILLs itself at operation N."""
    for step in itertools.count(1):
        assert step < MAX_STEPS
        lanes, board = commit_scenario.copy(tmp_path / f"step-{step}")
        pid = os.fork()
        if pid == 0:
            try:
                fs = KillFS(step, force_link_fallback=fallback)
                Journal(lanes, fs).finalize("b1", "t1", 7, board.commit)
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        check_promises(commit_scenario, lanes, board, recover_in_a_fresh_interpreter)
        if not killed:
            assert os.WEXITSTATUS(status) == 0
            break
    assert step > 20


def test_healthy_paths_count_their_operations(tmp_path: Path, commit_scenario: Scenario) -> None:
    """The fault loops above only prove something if the fault really fires inside the run."""
    lanes, board = commit_scenario.copy(tmp_path / "counted")
    fs = FaultyFS(10_000, errno.EIO)
    Journal(lanes, fs).finalize("b1", "t1", 7, board.commit)
    assert not fs.fired and fs.ops > 20
    assert isinstance(fs, LinuxFS)


@pytest.mark.parametrize("mode", CrashFS.MODES, ids=[f"{mode}-unsynced" for mode in CrashFS.MODES])
def test_power_loss_while_writing_pending_never_loses_a_returned_write(
    tmp_path: Path, commit_scenario: Scenario, fallback: bool, mode: str
) -> None:
    """Once ``write_pending`` returned, the record survives power loss; before, it may not."""
    for step in itertools.count(1):
        assert step < MAX_STEPS
        lanes, board = commit_scenario.copy(tmp_path / f"step-{step}")
        board.start("t1", 8)
        fs = CrashFS(lanes, step, mode=mode, force_link_fallback=fallback)
        returned = False
        try:
            Journal(lanes, fs).write_pending(**pending_kwargs(run_id=8))
            returned = True
            fs.step("after-return")
        except PowerLoss:
            fs.restore()
        healthy = Journal(lanes)
        assert healthy.has_pending("b1", "t1", 8) or not returned
        healthy.recover(board.commit, board.make_retryable)
        assert board.retries() == []
        committed_runs = sorted(run for _, run, _ in board.completions())
        assert committed_runs == ([7, 8] if returned else [7]) or committed_runs == [7, 8]
        if returned and not fs.fired:
            break


@pytest.mark.parametrize("mode", CrashFS.MODES, ids=[f"{mode}-unsynced" for mode in CrashFS.MODES])
def test_power_loss_while_writing_documents_together(
    tmp_path: Path, commit_scenario: Scenario, fallback: bool, mode: str
) -> None:
    """Lane state and candidate share one directory fsync: once ``write_documents``
    returned both survive power loss; before, each is its old self or absent, never torn."""
    state, candidate = {"run_id": 9, "sessions": ["abc", "def"]}, {"n": 1}
    documents = [Document("t1.json", state), Document("t1.run-9.candidate-1.json", candidate, True)]
    for step in itertools.count(1):
        assert step < MAX_STEPS
        lanes, _board = commit_scenario.copy(tmp_path / f"step-{step}")
        fs = CrashFS(lanes, step, mode=mode, force_link_fallback=fallback)
        returned = False
        try:
            Journal(lanes, fs).write_documents("b1", documents)
            returned = True
            fs.step("after-return")
        except PowerLoss:
            fs.restore()
        written = lanes / "b1" / "t1.run-9.candidate-1.json"
        kept_state = json.loads((lanes / "b1" / "t1.json").read_bytes())
        kept_candidate = json.loads(written.read_bytes()) if written.exists() else None
        if returned:
            assert (kept_state, kept_candidate) == (state, candidate)
        else:
            assert kept_state in (LANE_STATE, state) and kept_candidate in (None, candidate)
        if returned and not fs.fired:
            break
