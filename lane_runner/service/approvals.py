"""The approval gate as a runner applies it (docs/approvals.md): the board's approval
from the configuration, what a task waits for, and the second factor's code checked.

The board records a person's word (``Board.approve``, ``Board.deny``) and its claim
passes over a task waiting to run; this module says which approval applies, and checks
a TOTP code against the secret in the file ``approval_totp_file`` names, read only when
a code is checked.
"""

from __future__ import annotations

import hmac
import stat
from enum import StrEnum
from pathlib import Path
from typing import Any

from lane_runner import extras
from lane_runner.board import rules
from lane_runner.board.model import Approval, Task
from lane_runner.config import Config
from lane_runner.errors import UsageError

#: Every board without an entry of its own takes this one's.
EVERY_BOARD = "*"
#: Codes of the time step before and after now are taken too (a clock a little off, a
#: code typed as it turned).
VALID_WINDOW = 1
#: What ``task ls``, ``task show`` and ``status`` say of a task waiting for approval.
AWAITING = "awaiting approval"


def approval_for(cfg: Config, board: str) -> Approval:
    """The configuration's approval for ``board`` (its own entry, else ``"*"``)."""
    return Approval(cfg.approval.get(board, cfg.approval.get(EVERY_BOARD, Approval.NONE.value)))


def awaiting(cfg: Config, task: Task) -> Approval | None:
    """What ``task`` waits for approval before, now, under ``cfg``; None: nothing."""
    return rules.awaiting_approval(task, approval_for(cfg, task.board))


class PushGate(StrEnum):
    """Whether a done task's push and ``after_done`` may go (``run/followup.py``)."""

    GO = "go"
    WAIT = "wait"
    """Its approval is ``before_push`` and nobody has said yet: the cleanup sweep looks
    again after each sweep, so an approval from any runner lets it go."""
    WITHHELD = "withheld"
    """Denied: they never run for this result."""


def push_gate(cfg: Config, task: Task) -> PushGate:
    if rules.approval_of(task, approval_for(cfg, task.board)) is not Approval.BEFORE_PUSH:
        return PushGate.GO
    if task.decision is None:
        return PushGate.WAIT
    return PushGate.GO if task.approved else PushGate.WITHHELD


def shown_status(cfg: Config, task: Task) -> str:
    """The task's status as the operator reads it: ``ready (awaiting approval)``."""
    waiting = awaiting(cfg, task)
    if waiting is None:
        return task.status.value
    return f"{task.status.value} ({AWAITING} {waiting.value.replace('_', ' ')})"


def check_code(cfg: Config, code: str | None, now: float) -> int | None:
    """The time step of a right ``code``, or None when no second factor is configured;
    UsageError for a missing or wrong code, or an unusable secret file. Whether the code
    was used before is the board's to say (``Board.approve``)."""
    if cfg.approval_totp_file is None:
        if code is not None:
            raise UsageError("--code given, but no approval_totp_file is configured")
        return None
    if not code:
        raise UsageError("this runner asks a second factor: give the code with --code")
    totp = authenticator(cfg.approval_totp_file)
    for offset in range(-VALID_WINDOW, VALID_WINDOW + 1):
        at = now + offset * totp.interval
        if hmac.compare_digest(str(totp.at(at)), code.strip()):
            return int(at // totp.interval)  # the code's time step: used once per board
    raise UsageError("that code is wrong (or from another secret, or the clock is off)")


def authenticator(secret_file: str) -> Any:
    """The TOTP of the secret in ``secret_file``; UsageError saying what is wrong (pyotp
    missing, the file unreadable, not private, empty, or not base32)."""
    try:
        import pyotp
    except ImportError:
        raise UsageError("approval codes need pyotp: " + extras.install_hint("totp")) from None
    secret = _secret(Path(secret_file))
    try:
        totp = pyotp.TOTP(secret)
        totp.now()
    except (ValueError, TypeError):  # binascii.Error is a ValueError
        raise UsageError(f"approval_totp_file {secret_file} holds no base32 secret") from None
    return totp


def _secret(path: Path) -> str:
    """The base32 secret in ``path``; the file must be the operator's alone."""
    try:
        info = path.stat()
        text = path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise UsageError(f"approval_totp_file {path} cannot be read: {error.strerror}") from None
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise UsageError(f"approval_totp_file {path} is readable by others: chmod 600 it")
    if not text:
        raise UsageError(f"approval_totp_file {path} is empty: put a base32 secret in it")
    return text
