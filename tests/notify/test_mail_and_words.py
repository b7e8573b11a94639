"""A notification by e-mail (Apprise's ``mailto://`` to a loopback aiosmtpd), the words
of each kind (pure), and the ``notify`` key's checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from lane_runner.board.model import BlockKind, Event, NewTask, Status, Task
from lane_runner.errors import UsageError
from lane_runner.notifications import notices, sender
from lane_runner.notifications.dispatch import Dispatcher, backoff
from lane_runner.notifications.notices import Kind
from tests.notify.conftest import StoreOpener, notify_config
from tests.notify.receivers import smtp_receiver


def test_a_blocked_task_arrives_by_mail(open_store: StoreOpener, tmp_path: Path) -> None:
    store = open_store()
    board = store.create_board("main")
    with smtp_receiver() as smtp:
        cfg = notify_config(tmp_path, f'{{"*" = {{urls = ["{smtp.url()}"]}}}}')
        dispatch = Dispatcher(store, "node-a", lambda: cfg)
        dispatch.turn()
        task = board.add_task(NewTask(title="Migrate the schema"))
        claim = board.claim("node-a", 60, "cli-auto")
        assert claim is not None
        board.block(claim.run.id, "which column?\ntrace...", BlockKind.NEEDS_INPUT)
        assert dispatch.turn()
        [mail] = smtp.messages
    assert mail["To"] == "ops@example.test"
    assert f"main/{task.id} blocked (needs_input): Migrate the schema" in mail["Subject"]
    body = mail.get_payload(decode=True).decode() if not mail.is_multipart() else str(mail)
    assert "why: which column?" in body and "trace..." not in body
    assert "id: main/" in body


def event(kind: str, **data: object) -> Event:
    return Event(id=7, board="main", task_id="T1", kind=kind, run_id=3, at=1.0, data=data)


@pytest.mark.parametrize(
    ("kind", "data", "expected"),
    [
        ("completed", {}, Kind.DONE),
        ("replayed", {}, Kind.DONE),
        ("blocked", {"block_kind": "needs_input"}, Kind.BLOCKED),
        ("blocked", {"block_kind": "budget"}, Kind.BUDGET_SPENT),
        ("blocked", {"block_kind": "gave_up"}, Kind.GAVE_UP),
        ("gave_up", {}, Kind.GAVE_UP),
        ("review_requested", {}, Kind.REVIEW_REQUESTED),
        ("changes_requested", {}, Kind.CHANGES_REQUESTED),
        ("approved", {}, None),
        ("claimed", {}, None),
        ("reclaimed", {}, None),
        ("created", {}, None),
    ],
)
def test_each_event_is_the_notification_it_means(
    kind: str, data: dict[str, object], expected: Kind | None
) -> None:
    assert notices.kind_of(event(kind, **data)) is expected


def task(**fields: object) -> Task:
    base: dict[str, object] = dict(
        id="T1", board="main", title="Title", body="", status=Status.READY, assignee=None,
        priority=0, parents=(), workspace=None, max_runtime=None, goal_turns=1,
        current_run_id=None, completed_run_id=None, next_attempt_at=None, block_reason=None,
        block_kind=None, summary=None, result=None, failure_count=0, created_at=0.0,
        updated_at=0.0,
    )
    return Task(**{**base, **fields})  # type: ignore[arg-type]


def test_a_message_names_board_task_outcome_reason_cost_and_the_command() -> None:
    message = notices.from_event(
        event("blocked", reason="token=abcdefghijklmnopqrstuvwx leaked\nsecond",
              block_kind="capability"),
        task(title="Add\x1b[31m colour"), 1.234,
    )
    assert message is not None
    body = message.body()
    assert "board: main" in body and "task: T1 (Add" in body and "\x1b" not in body
    assert "outcome: blocked (capability)" in body and "cost: $1.23" in body
    assert "abcdefghijklmnopqrstuvwx" not in body and "second" not in body
    assert "more: lane-runner task show T1 --board main" in body
    assert message.id == "main/7/blocked"
    assert notices.Message.from_dict(message.to_dict()) == message


def test_ready_work_waiting_past_the_limit_is_said_once_per_oldest_task() -> None:
    waiting = [task(id="T1", updated_at=100.0), task(id="T2", updated_at=50.0)]
    assert notices.not_claiming("main", waiting, 50.0 + 29 * 60, 30) is None
    late = notices.not_claiming("main", waiting, 50.0 + 31 * 60, 30)
    assert late is not None and late.task_id == "T2" and late.id == "main/not_claiming/T2/50"
    # A task waiting for its backoff counts from when it became claimable.
    backing_off = [task(next_attempt_at=2000.0)]
    assert notices.not_claiming("main", backing_off, 2000.0 + 29 * 60, 30) is None


def test_one_entry_per_destination_and_no_url_in_it() -> None:
    message = notices.from_event(event("completed"), task(summary="ok"), None)
    assert message is not None
    urls = ["json://user:pw-secret@127.0.0.1:1/a", "ntfy://ntfy.example/lanes"]
    made = notices.notices(message, urls, 1.0)
    assert len({entry.id for entry in made}) == 2
    assert all("pw-secret" not in repr(entry) for entry in made)


def test_the_backoff_doubles_to_its_cap() -> None:
    assert [backoff(n) for n in (1, 2, 3)] == [5.0, 10.0, 20.0]
    assert backoff(40) == 3600.0


def test_the_id_rides_as_a_field_and_a_header_where_the_service_carries_them() -> None:
    assert "%3Aid=main%2F7%2Fdone" in sender.with_id("json://h/p?x=1", "main/7/done")
    assert sender.with_id("mailto://h?to=a@b", "main/7/done") == "mailto://h?to=a@b"


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('{main = {urls = "json://x"}}', "must be a list of Apprise URLs"),
        ('{main = {urls = ["not a url"]}}', "notify.main.urls[0] is not a URL"),
        ('{main = {urls = ["json://x"], events = ["finished"]}}', "'finished' is not an event"),
        ('{main = {urls = ["json://x"], colour = "red"}}', "notify.main.colour is not a setting"),
        ('{"bad name" = {urls = ["json://x"]}}', "is not a board name"),
        ('{main = {urls = ["json://x"], not_claiming_minutes = 0}}', "expected a number"),
    ],
)
def test_a_bad_notify_table_is_refused_naming_what_is_wrong(
    tmp_path: Path, table: str, words: str
) -> None:
    with pytest.raises(UsageError, match="notify") as refused:
        notify_config(tmp_path, table)
    assert words in str(refused.value)


def test_credentials_in_a_refused_url_are_not_quoted(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as refused:
        notify_config(tmp_path, '{main = {urls = ["json://u:hunter2 @x"]}}')
    assert "hunter2" not in str(refused.value)


def test_events_default_to_all_of_them(tmp_path: Path) -> None:
    cfg = notify_config(tmp_path, '{"*" = {urls = ["json://127.0.0.1/x"]}}')
    assert cfg.notify["*"]["events"] == [kind.value for kind in Kind]


def test_config_show_never_prints_a_notify_url(tmp_path: Path) -> None:
    from lane_runner.config import KEYS_BY_NAME

    url = "tgram://123456:AAbotTOKENsecret/987654"
    cfg = notify_config(tmp_path, f'{{main = {{urls = ["{url}"]}}}}')
    shown = KEYS_BY_NAME["notify"].shown(cfg.notify)  # type: ignore[misc]
    assert "AAbotTOKENsecret" not in repr(shown) and shown["main"]["urls"][0].startswith("tgram://")
