"""The shared board store: boards as rows in one PostgreSQL database (docs/ARCHITECTURE.md §5).

Several runners, each in its own pod, work one board here. The transactions are
``board/sql/``'s; this package holds what is PostgreSQL's own: the schema
(``schema``), the connection pool and transaction runner (``database``), the board's
gate, run ids and clock (``dialect``), the hot transitions as server-side functions
(``transitions``), change notification (``wakeups``) and the store (``store``).

Two locks, taken in this order (``board/sql/`` says why): a task's row,
``FOR NO KEY UPDATE`` (a claim's pick with ``SKIP LOCKED``, so runners claiming at
once take different tasks instead of queueing on one), and the board's gate, an
advisory lock on the board's name taken before a transition reads another task's
state or writes an event and kept to its commit: shared by claims and completions
(the functions of ``board/postgres/transitions.py``, which says what that changes),
exclusive for every other transition (``PostgresBoardDialect.lock_board``). Run
ids come from one sequence; a reader of ``events`` reads up to the board's settled
id, so it never skips an event that committed after a later-numbered one. A
transition that promotes children updates their rows under the gate, while an
archive of such a child holds the child's row and waits for the gate: PostgreSQL
detects that deadlock and aborts one, which the retry layer runs again.
Heartbeats and comments change no task and take neither lock; a heartbeat racing
a transition waits for the run's row and then re-checks its guard.

Transactions run at READ COMMITTED: a statement issued after a lock was granted
sees everything committed before it, and a locking ``SELECT`` re-checks its
conditions on the latest version of the rows it waited for.

Waits are bounded (``board/retry.py``): each transaction waits for a pooled
connection and for row locks (``lock_timeout``) only as long as the operation's
budget has left, and serialisation failures, deadlocks and lock timeouts are
retried within it.

Wake-ups: every transaction that changes a task's status sends ``NOTIFY`` on one
channel, and a dedicated connection per store listens. The payload names the
sending store, so a store ignores its own notifications: it already knows about
its own commits the moment they return.

Outages: connection errors (refused, reset, admin shutdown, pool timeout) surface
as ``BoardUnavailable``; the pool drops broken connections and reconnects with
its own backoff, and the listening connection reconnects with backoff too.

One clock: every time the board records (lease stamps and expiry, cooldowns,
events) is the database server's ``clock_timestamp()``, never a runner's, so a
pod whose clock is minutes off neither loses its live runs to others' rescues
nor keeps a dead node's runs past their lease. (Tests may hand the store a clock
of their own to move time by hand.)
"""
