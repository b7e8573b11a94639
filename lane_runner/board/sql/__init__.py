"""The board's transactions, written once for every SQL backend (docs/ARCHITECTURE.md §5).

``SqlBoard`` (``board.py``) implements the contract of ``board/base.py`` on top of a
``Dialect`` (``dialect.py``):
what differs between SQLite and PostgreSQL (placeholders, how a transaction
begins and is retried, how a board is locked and its run ids handed out, how other
runners hear of a change) lives in the dialect; what a transition reads, decides
(through ``board/rules.py``) and writes lives here, once.

Both backends keep the same tables and columns. Every statement names its board
as ``board = :board``: PostgreSQL holds every board in one set of tables, and an
SQLite file holds one board, whose rows all carry the dialect's ``scope`` ('').

Locking, the same promise on both. Two kinds of lock: a task's row lock
(``Dialect.lock_rows``; on PostgreSQL ``FOR NO KEY UPDATE``, on SQLite nothing,
as ``BEGIN IMMEDIATE`` already holds the whole file) and the board's lock
(``Dialect.lock_board``). A transaction that changes tasks takes the row locks of
its own tasks first, decides what it can from those tasks alone, and takes the
board lock before it reads another task's state or writes an event; both are kept
to its commit. So the decisions that need the whole board (a claim's pause check,
promoting children, a new task's parents) see every transition committed before
them; a board lock that is one writer at a time (SQLite's) makes event ids and run
ids follow commit order, and one shared by claims and completions (PostgreSQL's
gate) says where readers must stop (``Dialect.settled_events``); the statements of
a claim's pick and a
completion's own-task checks do not hold the board lock every runner waits on.
A claim picks its task before the board lock: the first claimable task that no
other transaction holds (``SKIP LOCKED``), re-checked under its row lock, so two
claims never get one task, and concurrent claims may commit a little out of
priority order (each took the first task nobody else was claiming). Reads,
heartbeats and comments change no task and take no lock but a run's row.
"""
