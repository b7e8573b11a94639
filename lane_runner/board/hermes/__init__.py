"""A Hermes Agent Kanban home as a board store: lane-runner as an external lane of Hermes.

Hermes leaves tasks whose assignee is not one of its profiles to control-plane lanes
that pull them with ``claim_task``; lane-runner is such a lane for the ``cli-*``
assignees (docs/ARCHITECTURE.md §3.4, §5). ``store`` serves a home's boards and
``board`` one board, assembled from a module per concern on one base (``access``):
``reads``, ``claims`` (and leases), ``completion``, ``release`` (block, reclaim),
``workspaces`` (what Hermes gives the worker) and ``refusals`` (what belongs to
Hermes). Beside them: ``home`` (finding a home, the release and API checked),
``rows`` (Hermes rows as board records), ``transaction`` (several Hermes calls in
one commit), ``pins`` (Hermes's file checks without dropping SQLite's locks) and
``watch`` (wake-ups without polling).
"""
