"""The randomized crash campaign (issue 48): two runner homes on one PostgreSQL board
sharing one git repository, kill -9 at moments a seed chooses, over the whole path
(claim, CLI, journal, result commit, push, hooks, board); at the end it counts lost
results, duplicate result commits, second CLI runs after an accepted result,
follow-ups run twice without their key and processes left. All must be zero.

``schedule`` (pure: the seed's kills), ``site`` (the homes, repository and board),
``drive`` (one campaign), ``evidence`` (what is gathered at the end) and ``tally``
(pure: what is counted). ``tests/postgres/test_campaign.py`` runs it in CI;
``python -m bench --only campaign`` runs a longer one.
"""

from bench.campaign.drive import Outcome, Plan, run

__all__ = ["Outcome", "Plan", "run"]
