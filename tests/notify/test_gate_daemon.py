"""The approval gate with a real daemon and the real command line: a task waits for
``task approve`` before its run (``task ls`` says so), and a done task's after_done
hook (as its push) waits for it too, then runs from the cleanup sweep."""

from __future__ import annotations

import json
import signal

from lane_runner.board.model import NewTask, Status
from lane_runner.board.sqlite import SqliteStore
from tests.harness import BOARD, Lane

FREE = "free"  # a board without approval: its task done proves the daemon looked


def settle(lane: Lane) -> None:
    """Wait until the daemon has claimed and finished a task on the free board: every
    claim pass since has had the held task before it."""
    store = SqliteStore(lane.home.boards)
    try:
        board = store.board(FREE)
        task = board.add_task(
            NewTask(title="free", assignee="cli-auto", workspace=str(lane.repo))
        )
        lane.wait(lambda: board.get_task(task.id).status is Status.DONE, what="the free task")
    finally:
        store.close()


def test_a_task_waits_for_task_approve_before_its_run(lane: Lane) -> None:
    lane.store.create_board(FREE)
    lane.write_config(approval={BOARD: "before_run"})
    held = lane.add("Drop the old table")
    lane.start()
    settle(lane)
    assert lane.runs(held.id) == []
    listed = lane.cli("task", "ls", "--board", BOARD)
    assert "ready (awaiting approval before run)" in listed.stdout, listed.stdout
    shown = json.loads(lane.cli("status", "--json").stdout)
    assert shown["boards"][BOARD]["awaiting_approval"] == [
        {"task_id": held.id, "before": "before_run"}
    ]
    approved = lane.cli("task", "approve", held.id, "--as", "alice", "--note", "read it")
    assert approved.returncode == 0, approved.stderr
    assert "approved work/" in approved.stdout and "by alice" in approved.stdout
    lane.wait(lambda: lane.board.get_task(held.id).status is Status.DONE, what="the run")
    [event] = [e for e in lane.board.events(held.id) if e.kind == "approved"]
    assert event.data["by"] == "alice" and event.data["note"] == "read it"


def test_a_done_tasks_after_done_waits_for_approval_then_runs(lane: Lane) -> None:
    marker = lane.root / "after-done.log"
    lane.write_config(
        approval={BOARD: "before_push"},
        hooks={"*": {"after_done": f'echo "$LANE_TASK_ID" >> {marker}'}},
        gc_interval=1.0,
    )
    held = lane.add("Ship it")
    lane.start()
    lane.wait(lambda: lane.board.get_task(held.id).status is Status.DONE, what="the run")
    lane.wait(lambda: "wait for approval" in (lane.root / "daemon.log").read_text(),
              what="the held follow-ups")
    assert not marker.exists()
    listed = lane.cli("task", "ls", "--board", BOARD)
    assert "done (awaiting approval before push)" in listed.stdout, listed.stdout
    denied = lane.cli("task", "deny", held.id, "--reason", "")
    assert denied.returncode != 0 and "--reason must say why" in denied.stderr
    approved = lane.cli("task", "approve", held.id)
    assert approved.returncode == 0, approved.stderr
    lane.wait(lambda: marker.exists() and held.id in marker.read_text(), what="after_done")
    assert marker.read_text().split() == [held.id]


def test_an_approval_given_while_the_daemon_is_down_lets_the_held_follow_up_run(
    lane: Lane,
) -> None:
    marker = lane.root / "after-done.log"
    lane.write_config(
        approval={BOARD: "before_push"},
        hooks={"*": {"after_done": f'echo "$LANE_TASK_ID" >> {marker}'}},
        gc_interval=1.0,
    )
    held = lane.add("Ship it")
    daemon = lane.start()
    lane.wait(lambda: "wait for approval" in (lane.root / "daemon.log").read_text(),
              what="the held follow-ups")
    daemon.send_signal(signal.SIGKILL)
    daemon.wait()
    approved = lane.cli("task", "approve", held.id, "--as", "carol")
    assert approved.returncode == 0, approved.stderr
    lane.start()
    lane.wait(lambda: marker.exists() and held.id in marker.read_text(), what="after_done")
    assert marker.read_text().split() == [held.id]
    listed = lane.cli("task", "ls", "--board", BOARD)
    assert "awaiting approval" not in listed.stdout


def test_notify_test_and_ls_from_the_command_line(lane: Lane) -> None:
    from tests.notify.receivers import free_port, http_receiver

    dead = f"json://127.0.0.1:{free_port()}/hook"
    with http_receiver() as receiver:
        lane.write_config(notify={"*": {"urls": [receiver.url, dead]}})
        tested = lane.cli("notify", "test", "--json")
        assert tested.returncode == 1, tested.stderr
        results = json.loads(tested.stdout)
        assert [r["sent"] for r in results] == [True, False]
        assert all(r["url"].startswith("json://…#") for r in results)
        assert str(receiver.port) not in tested.stdout
        assert receiver.ids() == ["work/test"]
    listed = lane.cli("notify", "ls", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []


def test_a_task_added_with_its_own_approval_waits_on_a_board_without_one(lane: Lane) -> None:
    added = lane.cli("task", "add", "--title", "Drop the legacy table",
                     "--workspace", str(lane.repo), "--approval", "before_run", "--json")
    assert added.returncode == 0, added.stderr
    held = json.loads(added.stdout)["id"]
    lane.start()
    free = lane.add("free")  # added after: done first, so the held one was passed over
    lane.wait(lambda: lane.board.get_task(free.id).status is Status.DONE, what="the free task")
    assert lane.runs(held) == []
    shown = json.loads(lane.cli("task", "show", held, "--json").stdout)
    assert shown["awaiting_approval"] == "before_run"
    assert lane.cli("task", "approve", held).returncode == 0
    lane.wait(lambda: lane.board.get_task(held).status is Status.DONE, what="the run")
