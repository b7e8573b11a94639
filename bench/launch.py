"""Start ``lane-runner`` instrumented for a benchmark.

``python -m bench.launch [--poll SECONDS] [--fsync-count FILE] -- <lane-runner args>``

``--poll`` turns the daemon into the common poll-every-N-seconds design (its
wake-on-board-change switched off, a claim sweep every N seconds) so the baseline
runs exactly the same claim and execution code. ``--fsync-count`` routes the
journal through a ``CountingFS`` and writes the count to FILE when the daemon exits.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.counting import CountingFS
from journal import Journal
from lane_runner import daemon
from lane_runner.board.sqlite import SqliteStore
from lane_runner.cli import main as cli
from lane_runner.service import services


def _poll_every(interval: float) -> None:
    daemon.CLAIM_SWEEP = interval

    def never_changed(self: object, timeout: float) -> bool:
        time.sleep(timeout)
        return False

    SqliteStore.wait_for_change = never_changed  # type: ignore[method-assign]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.launch")
    parser.add_argument("--poll", type=float)
    parser.add_argument("--fsync-count", type=Path)
    parser.add_argument("rest", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.poll:
        _poll_every(args.poll)
    counter = CountingFS()
    if args.fsync_count:
        services.Journal = lambda lanes: Journal(lanes, fs=counter)  # type: ignore[attr-defined,misc,assignment]
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    try:
        return cli.main(rest)
    finally:
        if args.fsync_count:
            args.fsync_count.write_text(json.dumps({"fsyncs": counter.fsyncs}))


if __name__ == "__main__":
    raise SystemExit(main())
