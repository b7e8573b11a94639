"""The crash-safe terminal journal (docs/ARCHITECTURE.md §3.2, §4).

Knows files, inodes and fsync; knows nothing of boards, providers or HTTP: the
board commit is a callback (``CommitFn``) it is handed.

What one accepted result costs in fsyncs, and why each one is needed:

``write_pending`` -- 2
  1. the temp file's data, before the rename makes it visible: otherwise power
     loss can leave a complete-looking name over empty or torn data;
  2. the board directory, after the rename: otherwise the new name itself can
     vanish, and "durable on return" would be a lie.

``finalize`` (pending → committed or conflict) -- 4
  1-2. prepared evidence: data, then directory, for the same two reasons; the
       evidence must exist durably before the board is asked, because recovery
       replays prepared evidence first and in the order it became durable;
  (the board commit: its own transaction and durability)
  3-4. committed (or conflict) record: data, then directory -- this must be
       durable before anything that could replay the result disappears, or a
       crash could leave neither the pending record nor the board's answer.
  Retiring the prepared evidence and the pending inode costs no fsync: once the
  board's answer is durable, either entry coming back after a power loss (or a
  half-done retirement left under its staging name) replays into the same answer
  -- the exact-run guard says "already done by this run" -- and recovery runs
  before anything asks ``has_pending``. Their removal becomes durable with the
  directory's next fsync.

So 6 per accepted result; plus 1 (the lanes root) the first time a board
directory is created, and 1 per quarantine diagnostic and retirement in
recovery. Recovery finalizes pending records in batches (``finalize_batch``):
each record's two documents still fsync their data, but the two directory
fsyncs are taken once per batch, after every prepared evidence and after every
committed or conflict record. With the link + unlink fallback for
rename-no-replace the count is the same: one directory fsync covers both entry
changes.

Lane files (``write_documents``: lane state, candidates) cost 1 fsync each for
their data, for the same torn-data reason, plus 1 directory fsync per call,
however many files it writes. The daemon's attempt writes the lane state before
the CLI starts (2: the sequence numbers it reserves must never be reused), again
when the CLI names its session (2: a restart resumes that session), and at the
end the lane state and the candidate together (3). With the 6 above, a task
accepted on its first attempt costs 13.
"""

from journal.commit import CommitFn, CommitResult, FinalizeOutcome
from journal.facade import Document, Journal, PendingConflict
from journal.fs import FS, LinuxFS
from journal.inspect import Entry
from journal.record import RunIdentity, State, TerminalRecord
from journal.recovery import RecoveryEvent, RecoveryReport, RetryFn
from journal.retention import CollectReport, RetentionPolicy

__all__ = [
    "FS",
    "CollectReport",
    "CommitFn",
    "CommitResult",
    "Document",
    "Entry",
    "FinalizeOutcome",
    "Journal",
    "LinuxFS",
    "PendingConflict",
    "RecoveryEvent",
    "RecoveryReport",
    "RetentionPolicy",
    "RetryFn",
    "RunIdentity",
    "State",
    "TerminalRecord",
]
