"""The randomized crash campaign (``bench/campaign``) in CI: two runner homes on one
PostgreSQL board sharing one git repository, killed -9 at moments a seed chooses, for
five minutes of kills (120 to 250 on a 2-core machine running the rest of the suite
beside it); then lost results, duplicate result commits, second CLI runs after an
accepted result, follow-ups repeated without their key and processes left are counted,
and must all be zero.

Each run takes a fresh seed unless ``LANE_CAMPAIGN_SEED`` names one; the counts line is
printed in the session's summary, and a failure says how to run its seed again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.campaign import Plan, run

KILLS = 400
SECONDS = 300.0
COMMAND = ".venv/bin/python -m pytest tests/postgres/test_campaign.py"


@pytest.mark.timeout(1200)
def test_a_crash_campaign_loses_and_repeats_nothing(
    tmp_path: Path, postgres_database: str, record_property: Callable[[str, object], None]
) -> None:
    plan = Plan.chosen(os.environ, KILLS, SECONDS)
    outcome = run(tmp_path / "campaign", postgres_database, plan)
    record_property("campaign", outcome.line)
    assert outcome.kills > 0, outcome.report()
    assert outcome.clean, f"{outcome.report()}\nreproduce: {outcome.reproduce(COMMAND)}"
