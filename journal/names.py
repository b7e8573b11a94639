"""Every journal file name (docs/ARCHITECTURE.md §3.2), parsed into a typed identity and
formatted back.

Pure: no I/O. Authority comes from the path (§4 promise 3), so this module is
where a name is turned into the board/task/run it is allowed to speak for.
Names that merely resemble journal files (``.terminal.`` or ``.retire.`` in
them but not in the exact grammar) parse as ``MALFORMED`` so recovery can
quarantine them instead of ignoring them.
"""

from __future__ import annotations

import enum
import hashlib
import os
import re
from dataclasses import dataclass

QUARANTINE_DIR = "quarantine"
STAGING_PREFIX = ".retire."
TEMP_PREFIX = ".tmp."
STAGING_ATTEMPTS = 32

_SLUG = r"[A-Za-z0-9_.-]+"
_RUN = r"(?P<run>[1-9][0-9]{0,18})"
_TERMINAL = re.compile(
    rf"(?P<task>{_SLUG})\.run-{_RUN}\.terminal\."
    r"(?:(?P<plain>pending|committed)|(?P<evidence>prepared|conflict)-(?P<digest>[0-9a-f]{32}))\.json"
)
_CANDIDATE = re.compile(rf"(?P<task>{_SLUG})\.run-{_RUN}\.candidate-(?P<seq>[0-9]+)\.json")
_PROVIDER = re.compile(rf"(?P<task>{_SLUG})\.run-{_RUN}\.provider-(?P<seq>[0-9]+)\.result\.json")
_LANE_STATE = re.compile(rf"(?P<task>{_SLUG})\.json")
_STAGING = re.compile(
    r"\.retire\.(?P<origin>[0-9a-f]{16})\.(?P<inode>[0-9a-f]+-[0-9a-f]+)\.(?P<seq>[0-9]+)"
)
_TEMP = re.compile(r"\.tmp\.(?P<pid>[0-9]{1,10})\.(?P<nonce>[0-9a-f]{16})")
_QUARANTINE_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class Kind(enum.StrEnum):
    """What a name in a board directory is, by its name alone."""

    LANE_STATE = "lane-state"
    CANDIDATE = "candidate"
    PROVIDER_RESULT = "provider-result"
    PENDING = "pending"
    PREPARED = "prepared"
    COMMITTED = "committed"
    CONFLICT = "conflict"
    STAGING = "staging"
    TEMP = "temp"
    QUARANTINE_DIR = "quarantine-dir"
    MALFORMED = "malformed"
    OTHER = "other"


TERMINAL_KINDS = frozenset({Kind.PENDING, Kind.PREPARED, Kind.COMMITTED, Kind.CONFLICT})


@dataclass(frozen=True)
class EntryName:
    """A parsed board-directory name. Fields that a kind does not carry are None."""

    name: str
    kind: Kind
    task_id: str | None = None
    run_id: int | None = None
    digest: str | None = None
    sequence: int | None = None
    origin: str | None = None
    pid: int | None = None


def is_slug(value: str) -> bool:
    """A board slug or task id: ``[A-Za-z0-9_.-]+``, never ``.`` or ``..``."""
    return re.fullmatch(_SLUG, value) is not None and value not in (".", "..")


def parse(name: str) -> EntryName:
    """Classify one directory entry name."""
    if match := _TERMINAL.fullmatch(name):
        return _terminal(name, match)
    attempt = _attempt_file(name)
    if attempt is not None:
        return attempt
    if match := _STAGING.fullmatch(name):
        return EntryName(name, Kind.STAGING, sequence=int(match["seq"]), origin=match["origin"])
    if match := _TEMP.fullmatch(name):
        return EntryName(name, Kind.TEMP, pid=int(match["pid"]))
    if name == QUARANTINE_DIR:
        return EntryName(name, Kind.QUARANTINE_DIR)
    if name.startswith(STAGING_PREFIX) or ".terminal." in name:
        return EntryName(name, Kind.MALFORMED)
    if (match := _LANE_STATE.fullmatch(name)) and is_slug(match["task"]):
        return EntryName(name, Kind.LANE_STATE, match["task"])
    return EntryName(name, Kind.OTHER)


def _attempt_file(name: str) -> EntryName | None:
    """A candidate or a provider result of one attempt (malformed when its task is no
    slug), or None when the name is neither."""
    for pattern, kind in ((_CANDIDATE, Kind.CANDIDATE), (_PROVIDER, Kind.PROVIDER_RESULT)):
        if match := pattern.fullmatch(name):
            if not is_slug(match["task"]):
                return EntryName(name, Kind.MALFORMED)
            return EntryName(
                name, kind, match["task"], int(match["run"]), sequence=int(match["seq"])
            )
    return None


def _terminal(name: str, match: re.Match[str]) -> EntryName:
    if not is_slug(match["task"]):
        return EntryName(name, Kind.MALFORMED)
    kind = Kind(match["plain"] or match["evidence"])
    return EntryName(name, kind, match["task"], int(match["run"]), digest=match["digest"])


def lane_state(task_id: str) -> str:
    """``<task>.json``: the task's lane state."""
    return f"{task_id}.json"


def candidate(task_id: str, run_id: int, sequence: int) -> str:
    """``<task>.run-<R>.candidate-<n>.json``: the structured answer of attempt ``n``."""
    return f"{task_id}.run-{run_id}.candidate-{sequence}.json"


def provider_result(task_id: str, run_id: int | str, sequence: int | str) -> str:
    """``<task>.run-<R>.provider-<n>.result.json``: the file a CLI writes its answer to in
    attempt ``n`` (codex ``-o``). A ``str`` run or sequence is a placeholder, as a dry
    run shows the name before any run has a number."""
    return f"{task_id}.run-{run_id}.provider-{sequence}.result.json"


def pending(task_id: str, run_id: int) -> str:
    return f"{task_id}.run-{run_id}.terminal.pending.json"


def committed(task_id: str, run_id: int) -> str:
    return f"{task_id}.run-{run_id}.terminal.committed.json"


def prepared(task_id: str, run_id: int, digest: str) -> str:
    return f"{task_id}.run-{run_id}.terminal.prepared-{digest}.json"


def conflict(task_id: str, run_id: int, digest: str) -> str:
    return f"{task_id}.run-{run_id}.terminal.conflict-{digest}.json"


def of_record(state: str, task_id: str, run_id: int, digest: str) -> str:
    """The canonical name of a terminal record in ``state``."""
    if state in ("prepared", "conflict"):
        return f"{task_id}.run-{run_id}.terminal.{state}-{digest}.json"
    return f"{task_id}.run-{run_id}.terminal.{state}.json"


def origin_of(name: str) -> str:
    """The ``<p>`` of a staging name: binds it to the canonical name it came from."""
    return hashlib.sha256(os.fsencode(name)).hexdigest()[:16]


def staging(origin_name: str, device: int, inode: int, attempt: int) -> str:
    """``.retire.<p>.<s>.<k>``: ``<s>`` is the staged inode as ``<dev>-<ino>`` in hex."""
    return f"{STAGING_PREFIX}{origin_of(origin_name)}.{device:x}-{inode:x}.{attempt}"


def temp(nonce: bytes) -> str:
    """A writer's private temp name; the pid lets recovery tell abandoned ones apart."""
    return f"{TEMP_PREFIX}{os.getpid()}.{nonce.hex()[:16]}"


def quarantine(name: str, reason: str, fingerprint: str, attempt: int) -> str:
    """``<name>.<reason>.<fp>.<k>.quarantine``, with the original name made safe and short.

    The untrusted name may hold any bytes and be up to NAME_MAX long; it is reduced
    to the slug alphabet and 96 characters so the diagnostic name is always valid.
    """
    safe = _QUARANTINE_UNSAFE.sub("_", name)[:96].lstrip(".") or "_"
    return f"{safe}.{reason}.{fingerprint}.{attempt}.quarantine"


def printable(name: str) -> str:
    """The name as valid UTF-8 text for JSON and logs (undecodable bytes escaped)."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")
