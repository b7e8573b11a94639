"""One board on an SQL backend: the board contract, assembled from this package's parts.

Each concern is its own module on one base (``access.py``); a backend differs only by
its ``Dialect`` (``dialect.py``), and PostgreSQL's ``PostgresBoard`` overrides the hot
transitions with server-side functions (``board/postgres/transitions.py``).
"""

from __future__ import annotations

from lane_runner.board.sql.approvals import SqlApprovals
from lane_runner.board.sql.claims import SqlClaims
from lane_runner.board.sql.completion import SqlCompletion
from lane_runner.board.sql.controls import SqlControls
from lane_runner.board.sql.edits import SqlEdits
from lane_runner.board.sql.ledger import SqlLedger
from lane_runner.board.sql.outbox import SqlOutbox
from lane_runner.board.sql.reads import SqlReads
from lane_runner.board.sql.release import SqlRelease
from lane_runner.board.sql.reviews import SqlReviewRuns


class SqlBoard(
    SqlClaims,
    SqlCompletion,
    SqlRelease,
    SqlEdits,
    SqlControls,
    SqlReads,
    SqlLedger,
    SqlOutbox,
    SqlApprovals,
    SqlReviewRuns,
):
    """One board on an SQL backend. Methods are safe to call from several threads."""
