"""Two pods (homes, daemons) on one PostgreSQL board with the same notifications and
approval gate (issue 44): each event is sent by one of them, once; a task held for
approval by both is approved from either pod's command line and run by one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lane_runner.board.model import NewTask, NoticeState, Status
from tests.notify.receivers import HttpReceiver, http_receiver

from .conftest import WORKSPACE, Fleet

pytest.importorskip("apprise", reason="the notify extra is not installed")
TASKS = 12


@pytest.fixture
def receiver() -> Iterator[HttpReceiver]:
    with http_receiver() as started:
        yield started


def test_two_pods_send_each_event_once(fleet: Fleet, receiver: HttpReceiver) -> None:
    pods = [fleet.pod(name) for name in ("pod-a", "pod-b")]
    for pod in pods:
        pod.write_config(notify={"*": {"urls": [receiver.url], "events": ["done"]}})
        pod.start()
    fleet.wait(lambda: fleet.board.outbox_cursor() is not None, 60, "the outbox's first look")
    for index in range(TASKS):
        fleet.board.add_task(NewTask(title=f"task {index}", workspace=WORKSPACE))
    fleet.wait(lambda: fleet.done() == TASKS, 180, "every task done")
    fleet.wait(
        lambda: [n.state for n in fleet.board.notices()] == [NoticeState.SENT] * TASKS,
        60, "every notification marked sent",
    )
    ids = receiver.ids()
    assert len(ids) == len(set(ids)) == TASKS  # all marked: nothing more can be sent


def test_a_task_held_for_approval_is_approved_from_either_pod(fleet: Fleet) -> None:
    pods = [fleet.pod(name) for name in ("pod-a", "pod-b")]
    for pod in pods:
        pod.write_config(approval="before_run")
        pod.start()
    held = fleet.board.add_task(NewTask(title="Drop the table", workspace=WORKSPACE))
    listed = pods[0].cli("task", "ls")
    assert "ready (awaiting approval before run)" in listed.stdout, listed.stdout
    approved = pods[1].cli("task", "approve", held.id, "--as", "dana")
    assert approved.returncode == 0, approved.stderr
    fleet.wait(lambda: fleet.board.get_task(held.id).status is Status.DONE, 120, "the run")
    assert len(fleet.board.runs(held.id)) == 1
