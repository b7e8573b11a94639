"""Waste under faults (issue 46): what crashes cost in model calls.

The real CLIs (codex, claude) run tasks through the daemon against the scripted model
server (``bench/modelserver.py``) inside a network namespace of its own, on a
PostgreSQL board of a server of the figure's own. Three passes of the same tasks:
*calm*; *faults* (the daemon killed -9 at seeded moments, a CLI killed mid tool call,
one PostgreSQL restart), where a restarted runner resumes the CLI's session; and
*scratch*, the same faults where every crashed run starts a new session (what a
restart-from-scratch dispatcher such as Hermes's does). Counted per accepted task:
model requests and prompt tokens, from the server's own log.

``plan`` (pure: the tasks' scripts and the seed's faults), ``site`` (the servers,
the home and the daemon), ``drive`` (one pass), ``tally`` (pure: what is counted).
"""
