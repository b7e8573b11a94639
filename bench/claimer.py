"""One lane-runner on a PostgreSQL board, claiming instant tasks: what the pods figure runs.

``python -m bench.claimer URL BOARD NODE LOG GO STOP``

It does what the daemon's loop does around a claim, nothing of a run's work: claim
(``Board.claim``), note the moment the claim returned, complete the run
(``Board.complete``), and when nothing is claimable wait on the board's
LISTEN/NOTIFY (``wait_for_change``), as the daemon does. It starts claiming once
the file GO exists and exits once STOP exists; LOG gets one JSON line per claim.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from lane_runner.board.postgres.store import PostgresStore

RESULT = {
    "status": "completed", "summary": "ok", "changed_files": [], "tests_run": [],
    "artifacts": [], "findings": [], "blockers": [],
}


def main(argv: list[str]) -> int:
    url, slug, node, log_path, go, stop = argv
    store = PostgresStore(url)
    board = store.board(slug)
    Path(f"{log_path}.ready").touch()
    while not Path(go).exists():
        time.sleep(0.001)
    with open(log_path, "a", encoding="utf-8") as log:
        while not Path(stop).exists():
            claim = board.claim(node, 60.0, "cli-auto")
            if claim is None:
                store.wait_for_change(0.2)
                continue
            started = time.time()
            # Logged before the completion: the harness reads the logs once every task
            # is done, and must find the last one's start there.
            log.write(json.dumps({"title": claim.task.title, "started": started}) + "\n")
            log.flush()
            board.complete(claim.run.id, RESULT, "ok")
    store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
