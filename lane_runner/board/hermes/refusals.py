"""What belongs to Hermes: the board contract's calls lane-runner refuses on a Hermes board.

Hermes owns its tasks (created, edited, unblocked, archived with ``hermes kanban``) and
its dispatch (paused and resumed by its own gateway), so each refusal names the Hermes
command that does it instead (docs/ARCHITECTURE.md §5).
"""

from __future__ import annotations

from lane_runner.board.hermes.access import HermesAccess
from lane_runner.board.model import BoardPause, NewTask, Run, StopRequest, Task, TaskEdit
from lane_runner.errors import UsageError

UNCONTROLLED = (
    "a Hermes board has no lane-runner {what}: its tasks and dispatch are Hermes's. "
    "{instead}, or 'lane-runner pause' to hold this runner"
)
#: What Hermes 0.19 offers instead of a board pause: its dispatcher runs in its gateway.
HERMES_DISPATCH = (
    "Hermes's own dispatcher is switched with 'hermes config set kanban.dispatch_in_gateway "
    "{value}' (then 'hermes gateway restart')"
)
READ_ONLY = (
    "lane-runner does not {what} on a Hermes board: Hermes owns its tasks. "
    "Use 'hermes kanban {command}'"
)

#: Hermes keeps no approvals lane-runner could record (docs/approvals.md).
NO_GATE = (
    "a Hermes board has no lane-runner approval gate: hold its tasks in Hermes "
    "('hermes kanban block TASK'), and set no 'approval' for this board"
)


class HermesRefusals(HermesAccess):
    """The contract's task edits and operator controls, each refused with what to run."""

    def add_task(self, new: NewTask) -> Task:
        raise UsageError(READ_ONLY.format(what="add tasks", command="create"))

    def unblock(self, task_id: str) -> Task:
        raise UsageError(READ_ONLY.format(what="unblock tasks", command=f"unblock {task_id}"))

    def archive(self, task_id: str) -> Task:
        raise UsageError(READ_ONLY.format(what="archive tasks", command=f"archive {task_id}"))

    def edit(self, task_id: str, edit: TaskEdit) -> Task:
        raise UsageError(
            READ_ONLY.format(what="edit tasks", command=f"assign {task_id} PROFILE")
            + " to reassign it (Hermes has no command that edits a task's title or body)"
        )

    def retry(self, task_id: str, comment: str, author: str = "operator") -> Task:
        raise UsageError(
            READ_ONLY.format(what="retry tasks", command=f"unblock {task_id} --reason TEXT")
        )

    def delete(self, task_id: str, *, force: bool = False) -> Task:
        raise UsageError(READ_ONLY.format(what="delete tasks", command=f"archive {task_id}"))

    def approve(
        self, task_id: str, by: str, note: str = "", code_step: int | None = None
    ) -> Task:
        raise UsageError(NO_GATE)

    def deny(self, task_id: str, by: str, reason: str) -> Task:
        raise UsageError(NO_GATE)

    def request_stop(self, task_id: str, reason: str, *, requeue: bool) -> Run:
        instead = f"Use 'hermes kanban block {task_id}'"
        raise UsageError(UNCONTROLLED.format(what="stop", instead=instead))

    def stop_request(self, run_id: int) -> StopRequest | None:
        """Never any: Hermes's schema has no place for a stop request lane-runner could read."""
        return None

    def pause(self, reason: str, by: str) -> BoardPause:
        instead = HERMES_DISPATCH.format(value="false")
        raise UsageError(UNCONTROLLED.format(what="pause", instead=instead))

    def resume(self) -> bool:
        instead = HERMES_DISPATCH.format(value="true")
        raise UsageError(UNCONTROLLED.format(what="resume", instead=instead))

    def paused(self) -> BoardPause | None:
        return None
