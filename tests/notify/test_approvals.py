"""The approval gate on real boards (SQLite, PostgreSQL): a claim waits for approval
before a run; an edit withdraws an approval; a denial blocks, and a retry asks again;
TOTP codes right, wrong and replayed (from another runner of the board too); and the
approval_needed notification, sent once."""

from __future__ import annotations

import time
from pathlib import Path

import pyotp
import pytest

from lane_runner import config as configuration
from lane_runner.board.base import Board
from lane_runner.board.model import (
    Approval,
    BlockKind,
    Decision,
    NewTask,
    Status,
    TaskEdit,
    TaskSettings,
)
from lane_runner.errors import UsageError
from lane_runner.notifications.dispatch import Dispatcher
from lane_runner.service import approvals
from tests.notify.conftest import StoreOpener, notify_config
from tests.notify.receivers import HttpReceiver

NODE = "node-a"
HELD = Approval.BEFORE_RUN


def claim(board: Board, approval: Approval = HELD) -> str | None:
    claimed = board.claim(NODE, 60, "cli-auto", (), approval)
    return None if claimed is None else claimed.task.id


def test_a_task_waits_for_approval_before_its_run_then_runs(open_store: StoreOpener) -> None:
    board = open_store().create_board("main")
    task = board.add_task(NewTask(title="Drop the old table"))
    assert claim(board) is None
    assert board.get_task(task.id).status is Status.READY  # untouched
    approved = board.approve(task.id, "alice", "read it")
    assert approved.decision is Decision.APPROVED and approved.decided_by == "alice"
    assert claim(open_store().board("main")) == task.id  # another runner claims it
    [event] = [e for e in board.events(task.id) if e.kind == "approved"]
    assert event.data == {"by": "alice", "note": "read it", "second_factor": False}


def test_a_tasks_own_approval_wins_over_the_boards(open_store: StoreOpener) -> None:
    board = open_store().create_board("main")
    own = board.add_task(NewTask(title="held", settings=TaskSettings(approval=HELD)))
    free = board.add_task(
        NewTask(title="free", priority=-1, settings=TaskSettings(approval=Approval.NONE))
    )
    held_too = board.add_task(NewTask(title="by the board", priority=-2))
    assert claim(board, Approval.NONE) == free.id  # its own before_run holds the first
    assert claim(board, Approval.NONE) == held_too.id  # the board's none lets this one go
    assert claim(board, Approval.NONE) is None
    board.approve(own.id, "alice")
    assert claim(board, HELD) == own.id
    other = board.add_task(NewTask(title="x", settings=TaskSettings(approval=Approval.NONE)))
    assert claim(board, HELD) == other.id  # its own none wins over the board's before_run


def test_without_an_approval_setting_nothing_waits(open_store: StoreOpener) -> None:
    board = open_store().create_board("main")
    task = board.add_task(NewTask(title="t"))
    assert claim(board, Approval.NONE) == task.id


def test_an_edit_withdraws_the_approval(open_store: StoreOpener) -> None:
    board = open_store().create_board("main")
    task = board.add_task(NewTask(title="t"))
    board.approve(task.id, "alice")
    edited = board.edit(task.id, TaskEdit(body="now do something else"))
    assert edited.decision is None
    assert claim(board) is None


def test_a_denial_blocks_with_its_reason_and_a_retry_asks_again(open_store: StoreOpener) -> None:
    board = open_store().create_board("main")
    task = board.add_task(NewTask(title="t"))
    denied = board.deny(task.id, "bob", "not this week")
    assert denied.status is Status.BLOCKED and denied.block_kind is BlockKind.DENIED
    assert denied.block_reason == "denied by bob: not this week"
    assert [e.data for e in board.events(task.id) if e.kind == "denied"] == [
        {"by": "bob", "reason": "not this week"}
    ]
    retried = board.retry(task.id, "try again")
    assert retried.status is Status.READY and retried.decision is None
    assert claim(board) is None


def test_a_running_task_cannot_be_denied(open_store: StoreOpener) -> None:
    board = open_store().create_board("main")
    task = board.add_task(NewTask(title="t"))
    assert claim(board, Approval.NONE) == task.id
    with pytest.raises(UsageError, match="stop it first"):
        board.deny(task.id, "bob", "no")


# -- the second factor -----------------------------------------------------------------

def totp_config(tmp_path: Path, secret: str, mode: int = 0o600) -> configuration.Config:
    secret_file = tmp_path / "totp-secret"
    secret_file.write_text(secret + "\n")
    secret_file.chmod(mode)
    return configuration.load(
        tmp_path / "home",
        {"LANE_RUNNER_APPROVAL_TOTP_FILE": str(secret_file), "LANE_RUNNER_APPROVAL": "before_run"},
    )


def test_totp_codes_right_wrong_and_replayed(open_store: StoreOpener, tmp_path: Path) -> None:
    secret = pyotp.random_base32()
    cfg = totp_config(tmp_path, secret)
    board = open_store().create_board("main")
    first, second = (board.add_task(NewTask(title=f"t{n}")) for n in (1, 2))
    now = time.time()
    code = pyotp.TOTP(secret).at(now)
    wrong = f"{(int(code) + 1) % 1_000_000:06d}"
    with pytest.raises(UsageError, match="wrong"):
        approvals.check_code(cfg, wrong, now)
    with pytest.raises(UsageError, match="--code"):
        approvals.check_code(cfg, None, now)
    step = approvals.check_code(cfg, code, now)
    assert step is not None
    board.approve(first.id, "alice", code_step=step)
    # The same code again, through another runner of the board: refused, nothing written.
    other = open_store().board("main")
    with pytest.raises(UsageError, match="used already"):
        other.approve(second.id, "mallory", code_step=approvals.check_code(cfg, code, now + 1))
    assert other.get_task(second.id).decision is None
    # The next code works.
    later = now + 30
    board.approve(second.id, "alice", code_step=approvals.check_code(
        cfg, pyotp.TOTP(secret).at(later), later))
    assert [claim(board), claim(board)] == [first.id, second.id]


def test_a_code_from_the_next_step_is_taken_and_one_far_off_is_not(tmp_path: Path) -> None:
    secret = pyotp.random_base32()
    cfg = totp_config(tmp_path, secret)
    now = 1_800_000_000.0
    assert approvals.check_code(cfg, pyotp.TOTP(secret).at(now + 30), now) == int(now // 30) + 1
    with pytest.raises(UsageError, match="wrong"):
        approvals.check_code(cfg, pyotp.TOTP(secret).at(now + 120), now)


def test_a_secret_file_others_can_read_is_refused(tmp_path: Path) -> None:
    secret = pyotp.random_base32()
    cfg = totp_config(tmp_path, secret, mode=0o644)
    with pytest.raises(UsageError, match="chmod 600"):
        approvals.check_code(cfg, pyotp.TOTP(secret).now(), time.time())


def test_a_code_without_a_secret_configured_is_refused(tmp_path: Path) -> None:
    cfg = configuration.load(tmp_path / "home", {})
    assert approvals.check_code(cfg, None, time.time()) is None
    with pytest.raises(UsageError, match="no approval_totp_file"):
        approvals.check_code(cfg, "123456", time.time())


# -- the notification ------------------------------------------------------------------

def test_approval_needed_is_sent_once_and_not_for_an_approved_task(
    open_store: StoreOpener, tmp_path: Path, receiver: HttpReceiver
) -> None:
    store = open_store()
    board = store.create_board("main")
    cfg = notify_config(
        tmp_path, f'{{main = {{urls = ["{receiver.url}"], events = ["approval_needed"]}}}}',
        approval="before_run",
    )
    sender = Dispatcher(store, NODE, lambda: cfg)
    sender.turn()
    waiting = board.add_task(NewTask(title="Rotate the keys"))
    approved = board.add_task(NewTask(title="Already fine"))
    board.approve(approved.id, "alice")
    sender.turn()
    sender.turn()
    [post] = receiver.posts
    assert post.payload["id"].endswith("/approval_needed")
    assert f"main/{waiting.id} approval needed before run" in post.payload["title"]
    assert f"lane-runner task approve {waiting.id} --board main" in post.payload["message"]
    assert approvals.shown_status(cfg, board.get_task(waiting.id)) == (
        "ready (awaiting approval before run)"
    )


def test_doctor_names_a_bad_notify_url_and_an_unusable_secret(tmp_path: Path) -> None:
    from lane_runner.cli.checks import Level
    from lane_runner.cli.doctor_people import people_checks

    secret_file = tmp_path / "totp"
    secret_file.write_text("not base32 at all!\n")
    secret_file.chmod(0o600)
    cfg = configuration.load(tmp_path / "home", {
        "LANE_RUNNER_NOTIFY": '{main = {urls = ["json://127.0.0.1:9/x", "nosuch://tok3n/x"]}}',
        "LANE_RUNNER_APPROVAL_TOTP_FILE": str(secret_file),
    })
    checks = people_checks(cfg)
    assert [(c.name, c.level) for c in checks] == [
        ("notify.main.urls[0]", Level.PASS),
        ("notify.main.urls[1]", Level.FAIL),
        ("approval code", Level.FAIL),
    ]
    assert "tok3n" not in repr(checks) and "no base32 secret" in checks[2].detail
