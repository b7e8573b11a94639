"""The supervisor with real processes: limits, stall clock, kill tree, memory bound."""

from __future__ import annotations

import itertools
import re
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from lane_runner.providers import Classification, run_attempt
from lane_runner.providers.lines import TRUNCATED, LineSplitter, Tail
from lane_runner.providers.supervisor import STDOUT_PIPE_SIZE, Ended, Limits, Supervisor
from lane_runner.providers.tasklog import TaskLog

from .conftest import RequestFactory


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _logged_pids(log_path: Path) -> list[int]:
    match = re.search(r"pids: (\d+) (\d+)", log_path.read_text())
    assert match, "the simulator did not report its descendants"
    return [int(match.group(1)), int(match.group(2))]


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_lease_loss_kills_the_whole_tree(make_request: RequestFactory, provider: str) -> None:
    """Grandchildren that setsid and ignore SIGTERM, under a root that ignores it too.

    The lease is lost once the simulator has reported its descendants: on a loaded
    machine a fixed number of beats could come before it ignores SIGTERM."""
    beats: list[float] = []
    log_path = make_request(provider).log_path

    def heartbeat() -> bool:
        beats.append(time.monotonic())
        return len(beats) < 3 or b"pids: " not in log_path.read_bytes()

    req = make_request(provider, prompt="[sim:grandchildren] x", heartbeat=heartbeat)
    assert req.log_path == log_path
    attempt = run_attempt(req)
    assert attempt.classification is Classification.LEASE_LOST
    assert attempt.signal == 9 and len(beats) >= 3
    pids = _logged_pids(req.log_path)
    assert not [pid for pid in pids if _alive(pid)]
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()], "zombies left unreaped"


def test_a_heartbeat_that_waits_does_not_stop_the_stream(make_request: RequestFactory) -> None:
    """The first heartbeat returns only once the CLI's output has reached the task log.

    A heartbeat made inside the pipe loop would wait for reads that only that loop
    makes: it would give up after ``PATIENCE`` and the run would end as lease-lost.
    """
    patience = 30.0  # a fail-safe for the wrong implementation, not a timing bound
    req = make_request("codex", prompt="[sim:slow:0.05:8] x")

    def streamed() -> bool:
        return req.log_path.exists() and b"still working (6/8)" in req.log_path.read_bytes()

    def heartbeat() -> bool:
        give_up = time.monotonic() + patience
        while not streamed():
            if time.monotonic() > give_up:
                return False
            time.sleep(0.01)
        return True

    attempt = run_attempt(replace(req, heartbeat=heartbeat, heartbeat_interval=0.01))
    assert attempt.classification is not Classification.LEASE_LOST, attempt.reason
    assert streamed()


def test_deadline_times_out(make_request: RequestFactory) -> None:
    attempt = run_attempt(make_request("codex", prompt="[sim:hang] x",
                                       deadline=time.monotonic() + 1.0))
    assert attempt.classification is Classification.TIMED_OUT


def test_cancel_terminates(make_request: RequestFactory) -> None:
    cancel = threading.Event()
    timer = threading.Timer(0.5, cancel.set)
    timer.start()
    attempt = run_attempt(make_request("claude", prompt="[sim:hang] x", cancel=cancel))
    timer.cancel()
    assert attempt.classification is Classification.CANCELLED
    assert attempt.signal == 15


def test_stall_clock_fires_on_retries_forever(make_request: RequestFactory) -> None:
    req = make_request("claude", prompt="[sim:reconnect-forever] x", stall_timeout=1.0)
    attempt = run_attempt(req)
    assert attempt.classification is Classification.STALLED, attempt.reason
    assert "api_retry" in attempt.tail


def test_codex_that_spent_its_reconnects_is_an_auth_failure_not_a_stall(
    make_request: RequestFactory,
) -> None:
    """Offline or without usable credentials, codex waits for the network for ever once
    its five reconnects are spent: that word ends the attempt, long before the stall clock."""
    req = make_request("codex", prompt="[sim:reconnect-forever] x", stall_timeout=600.0)
    attempt = run_attempt(req)
    assert attempt.classification is Classification.AUTH, attempt.reason
    assert "could not reach its service after its reconnects" in attempt.reason
    assert "waiting for network" in attempt.reason and "5/5" in attempt.tail


@pytest.mark.parametrize("provider", ["codex", "claude"])
def test_stall_clock_spares_slow_but_active(make_request: RequestFactory, provider: str) -> None:
    """Events every 0.5 s for 4 s against a 2 s stall timeout: the run outlives the timeout
    twice over, and each gap leaves a fourfold margin (1 s against 0.4 s failed in CI
    while the machine's two cores ran the rest of the suite)."""
    req = make_request(provider, prompt="[sim:slow:0.5:8] x", stall_timeout=2.0)
    attempt = run_attempt(req)
    assert attempt.classification is Classification.OK, attempt.reason


def _rss_kib() -> int:
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]


def test_200_mb_of_output_with_bounded_memory(make_request: RequestFactory) -> None:
    size = 200 * 1024 * 1024
    req = make_request("codex", prompt=f"[sim:huge:{size}] x", rotate_bytes=32 * 1024 * 1024)
    before = _rss_kib()
    attempt = run_attempt(req)
    growth_mib = (_rss_kib() - before) / 1024
    assert attempt.classification is Classification.OK, attempt.reason
    assert growth_mib < 64
    assert len(attempt.tail) <= 64 * 1024
    parts = sorted(req.log_path.parent.iterdir())
    assert [part.name for part in parts] == ["t1.log", "t1.log.1", "t1.log.2", "t1.log.3"]
    assert all(part.stat().st_size <= 32 * 1024 * 1024 for part in parts)


def _shell(script: str, prompt: bytes, tmp_path: Path) -> Ended:
    """``sh -c script`` under the supervisor, ``prompt`` on its stdin."""
    log = TaskLog(tmp_path / "sh.log", rotate_bytes=1 << 20)
    try:
        return Supervisor(
            ["sh", "-c", script],
            cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin"},
            stdin=prompt,
            task_log=log,
            limits=Limits(deadline=time.monotonic() + 60, kill_grace=1.0),
            on_event=lambda event: True,
            heartbeat=lambda: True,
        ).run()
    finally:
        log.close()


@pytest.mark.parametrize("script", ["wc -c", "sleep 0.3; wc -c"])
def test_a_prompt_larger_than_the_pipe_reaches_the_cli_whole(tmp_path: Path, script: str) -> None:
    """The prompt goes in as the CLI reads it, however slowly, and stdin closes after it."""
    ended = _shell(script, b"p" * (3 << 20), tmp_path)
    assert ended.exit_status == 0
    assert ended.tail.strip() == str(3 << 20)


def test_the_cli_writes_its_output_into_a_wide_pipe(tmp_path: Path) -> None:
    probe = "import fcntl; print(fcntl.fcntl(1, fcntl.F_GETPIPE_SZ))"
    ended = _shell(f"sleep 0.3; {sys.executable} -c '{probe}'", b"", tmp_path)
    assert ended.tail.strip() == str(STDOUT_PIPE_SIZE)


def test_a_cli_that_never_reads_its_prompt_still_ends(tmp_path: Path) -> None:
    ended = _shell("echo done", b"p" * (3 << 20), tmp_path)
    assert (ended.exit_status, ended.stopped, ended.tail.strip()) == (0, None, "done")


def test_line_splitter_caps_long_lines() -> None:
    splitter = LineSplitter(cap=10)
    assert splitter.feed(b"short\nabcdefghijKLMNOP") == [b"short", b"abcdefghij" + TRUNCATED]
    assert splitter.feed(b"QRS\nnext\npartial") == [b"next"]
    assert splitter.feed(b"0123456789ABCDEF\n") == [b"partial012" + TRUNCATED]
    assert splitter.feed(b"tail") == []
    assert splitter.finish() == [b"tail"]


@given(st.binary(max_size=200), st.lists(st.integers(min_value=0, max_value=200), max_size=8))
@example(data=b"0123456789abc\n0123456789\nde\nfghijklmnopq", cuts=[3, 12, 20])
def test_lines_do_not_depend_on_how_the_stream_was_cut(data: bytes, cuts: list[int]) -> None:
    """Any chunking gives the lines of the whole stream, each capped at 10 bytes."""
    *complete, last = [
        line if len(line) <= 10 else line[:10] + TRUNCATED for line in data.split(b"\n")
    ]
    splitter, found = LineSplitter(cap=10), []
    for start, end in itertools.pairwise([0, *sorted(cuts), len(data)]):
        found += splitter.feed(data[start:end])
    assert found + splitter.finish() == complete + ([last] if last else [])


def test_tail_keeps_only_the_last_bytes() -> None:
    tail = Tail(limit=20, line_limit=8)
    for number in range(100):
        tail.extend([f"line {number} with more text".encode()])
    assert tail.text().endswith("line 99 ") and len(tail.text()) <= 20


@given(
    st.lists(st.binary(max_size=12), max_size=40),
    st.lists(st.integers(min_value=0, max_value=40), max_size=6),
)
@example(lines=[b"", b"a" * 9, b"b" * 9, b"c" * 8], cuts=[])  # the batch fills the limit to 1 byte
def test_a_tail_fed_in_batches_equals_one_fed_line_by_line(
    lines: list[bytes], cuts: list[int]
) -> None:
    """Skipping what a batch pushes out is only an optimisation: the tail is the same."""
    one_by_one, batched = Tail(limit=30, line_limit=9), Tail(limit=30, line_limit=9)
    for line in lines:
        one_by_one.extend([line])
    bounds = [0, *sorted(cuts), len(lines)]
    for start, end in itertools.pairwise(bounds):
        batched.extend(lines[start:end])
    assert batched.text() == one_by_one.text()


def test_task_log_rotates_and_keeps_a_bounded_number_of_parts(tmp_path: Path) -> None:
    log = TaskLog(tmp_path / "t.log", rotate_bytes=100, keep=2)
    for number in range(50):
        log.write_line(f"{number:03d} ".encode() * 4)
    log.close()
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == ["t.log", "t.log.1", "t.log.2"]
    assert (tmp_path / "t.log").read_bytes().endswith(b"049 " * 4 + b"\n")
    assert all(path.stat().st_size <= 100 for path in tmp_path.iterdir())


@given(
    st.lists(st.binary(max_size=30).map(lambda b: b.replace(b"\n", b"")), max_size=30),
    st.lists(st.integers(min_value=0, max_value=30), max_size=5),
    st.integers(min_value=1, max_value=120),
)
def test_a_task_log_written_in_batches_equals_one_written_line_by_line(
    lines: list[bytes], cuts: list[int], rotate_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as single, tempfile.TemporaryDirectory() as batch:
        one_by_one = TaskLog(Path(single) / "t.log", rotate_bytes, keep=50)
        for line in lines:
            one_by_one.write_line(line)
        one_by_one.close()
        batched = TaskLog(Path(batch) / "t.log", rotate_bytes, keep=50)
        for start, end in itertools.pairwise([0, *sorted(cuts), len(lines)]):
            batched.write_lines(lines[start:end])
        batched.close()
        assert _parts(Path(batch)) == _parts(Path(single))


def _parts(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.iterdir()}


def test_a_cli_that_closes_its_output_then_exits_keeps_its_answer(tmp_path: Path) -> None:
    """End-of-output is not death: the answer printed before the pipes closed counts."""
    ended = _shell('echo answer; exec >&- 2>&-; sleep 1.5; exit 0', b"", tmp_path)
    assert (ended.exit_status, ended.stopped, ended.tail.strip()) == (0, None, "answer")


def test_each_event_is_reported_as_it_happens(make_request: RequestFactory) -> None:
    """``status`` reads the last event from the progress reports: they follow the CLI's
    events, not the heartbeat. The heartbeat here waits until six events have streamed,
    so only the events themselves can have moved the reported ``last_event`` by then."""
    req = make_request("codex", prompt="[sim:slow:0.05:8] x")
    reports: list[float | None] = []
    seen_by_then: list[list[float | None]] = []

    def streamed() -> bool:
        return req.log_path.exists() and b"still working (6/8)" in req.log_path.read_bytes()

    def heartbeat() -> bool:
        give_up = time.monotonic() + 60.0  # a fail-safe, not a timing bound
        while not streamed() and time.monotonic() < give_up:
            time.sleep(0.01)
        seen_by_then.append(list(reports))
        return True

    attempt = run_attempt(replace(
        req, heartbeat=heartbeat, heartbeat_interval=0.01,
        on_progress=lambda progress: reports.append(progress.last_event),
    ))
    assert attempt.classification is Classification.OK, attempt.reason
    before_heartbeat = seen_by_then[0]
    # The start's reading, then at least one later one (a loaded machine may read
    # several events in one batch: one reading for them all).
    assert len({at for at in before_heartbeat if at is not None}) >= 2, before_heartbeat
