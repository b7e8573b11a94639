"""Completing a run on a Hermes board, exactly once.

A completion records the run id and the journal digest in the run's metadata
(``lane_runner``); a replay finds the task done by that very run with that digest and
answers ``duplicate``, and a run that is no longer the task's current one is ``stale``.
Hermes keeps no "completed by run" on the task, so the completed ``task_runs`` row is
the witness.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lane_runner import files
from lane_runner.board import rules
from lane_runner.board.hermes import rows, transaction
from lane_runner.board.hermes.access import AUTHOR
from lane_runner.board.hermes.reviews import HermesReviews
from lane_runner.board.model import CompleteOutcome

log = logging.getLogger(__name__)

#: Hermes's workspace kinds it keeps after completion (it removes ``scratch``).
KEPT_WORKSPACES = ("dir", "worktree")


@dataclass(frozen=True)
class Completion:
    """One ``complete_task`` call: the task, the run it is guarded on, what it records."""

    task_id: str
    run_id: int
    result: str
    summary: str
    metadata: dict[str, Any]

    def arguments(self) -> dict[str, Any]:
        return {
            "result": self.result,
            "summary": self.summary,
            "metadata": self.metadata,
            "expected_run_id": self.run_id,
        }


def _placed(workspace: str | None, artifacts: list[str]) -> list[str]:
    """The result's artifacts (relative to the workspace the run worked in, which the
    task's ``workspace_path`` names) as Hermes takes them: absolute paths inside it."""
    if not workspace:
        return list(artifacts)
    return [str(Path(workspace) / artifact) for artifact in artifacts]


def _completion_metadata(
    result: dict[str, Any],
    artifacts: list[str],
    offered: dict[str, Any],
    run_id: int,
    digest: str | None,
) -> dict[str, Any]:
    """What Hermes keeps on the completed run and hands the task's children.

    The worker's changed files, tests, artifacts (absolute) and findings at the top,
    where Hermes's ``build_worker_context``, its scratch clean-up and its notifiers
    look; lane-runner's own facts (route, provider sessions, node, run and journal
    digest) under ``lane_runner``.
    """
    metadata: dict[str, Any] = {
        key: result[key] for key in ("changed_files", "tests_run", "findings") if key in result
    }
    metadata["artifacts"] = artifacts
    metadata[rows.MARK] = {**offered, "run_id": run_id, "journal_digest": digest}
    storable: dict[str, Any] = json.loads(json.dumps(metadata, default=str))
    return storable



class HermesCompletion(HermesReviews):
    """``complete``: Hermes's ``complete_task``, guarded on the run; a task that asks for
    a review goes to ``review`` instead (``reviews.py``)."""

    def complete(
        self,
        run_id: int,
        result: dict[str, Any],
        summary: str,
        metadata: dict[str, Any] | None = None,
    ) -> CompleteOutcome:
        offered = dict(metadata or {})
        digest = offered.pop("journal_digest", None)
        result_text = rules.canonical_json(result).decode("utf-8")

        def work(connection: sqlite3.Connection) -> CompleteOutcome:
            run = connection.execute(
                "SELECT task_id FROM task_runs WHERE id = ?", (run_id,)
            ).fetchone()
            if run is None:
                return CompleteOutcome.STALE
            task_id = run["task_id"]
            if self._is_current(connection, task_id, run_id):
                kind, place = connection.execute(
                    "SELECT workspace_kind, workspace_path FROM tasks WHERE id = ?", (task_id,)
                ).fetchone()
                artifacts = _placed(place, result.get("artifacts", []))
                hermes_metadata = _completion_metadata(result, artifacts, offered, run_id, digest)
                done = Completion(task_id, run_id, result_text, summary, hermes_metadata)
                attach = kind in KEPT_WORKSPACES
                if self.asks_for_review(connection, task_id):
                    if self._to_review(connection, done, attach=attach):
                        return CompleteOutcome.COMPLETED
                elif self._complete(connection, done, attach=attach):
                    return CompleteOutcome.COMPLETED
            return self._settled(connection, task_id, run_id, digest, result)

        return self._call(work)

    @staticmethod
    def _is_current(connection: sqlite3.Connection, task_id: str, run_id: int) -> bool:
        row = connection.execute(
            "SELECT 1 FROM tasks WHERE id = ? AND status = 'running' AND current_run_id = ?",
            (task_id, run_id),
        ).fetchone()
        return row is not None

    def _complete(self, connection: sqlite3.Connection, done: Completion, *, attach: bool) -> bool:
        """Hermes's ``complete_task`` guarded on the run (upstream's ``expected_run_id``).

        With ``attach`` (a workspace Hermes keeps: ``dir:``, ``worktree``) the artifacts
        become the task's attachments in the same transaction; Hermes copies a scratch
        task's artifacts itself before it removes the directory.
        """
        if not attach:
            return self._complete_task(connection, done)
        with transaction.one_transaction(self._kb, connection) as nested:
            completed = self._complete_task(nested, done)
            if completed:
                self._attach(nested, done.task_id, done.metadata.get("artifacts", []))
        return completed

    def _to_review(self, connection: sqlite3.Connection, done: Completion, *, attach: bool) -> bool:
        """The result sent to ``review`` (``reviews.py``), its artifacts attached in the
        same transaction as a completion attaches them."""
        with transaction.one_transaction(self._kb, connection) as nested:
            moved = self.submit_for_review(
                nested, done.task_id, done.run_id, done.result, done.summary, done.metadata
            )
            if moved and attach:
                self._attach(nested, done.task_id, done.metadata.get("artifacts", []))
        return moved

    def _complete_task(self, connection: Any, done: Completion) -> bool:
        try:
            return bool(self._kb.complete_task(connection, done.task_id, **done.arguments()))
        except self._kb.ArtifactPreservationError as error:
            # Hermes copies a scratch task's declared artifacts before it deletes the
            # scratch dir, and refuses the completion when one is missing. The answer
            # matters more than the copy: complete with the list kept as words only.
            log.warning("task %s: artifacts not preserved by Hermes (%s)", done.task_id, error)
            kept = {k: v for k, v in done.metadata.items() if k != "artifacts"}
            kept["declared_artifacts"] = done.metadata.get("artifacts", [])
            arguments = {**done.arguments(), "metadata": kept}
            return bool(self._kb.complete_task(connection, done.task_id, **arguments))

    def _attach(self, connection: Any, task_id: str, artifacts: list[str]) -> None:
        """Copies of the artifacts as Hermes attachments (``hermes kanban attachments``),
        through Hermes's own ``store_attachment_bytes``: its names and its size cap. One
        that cannot be attached is only logged: its path is in the completion anyway."""
        limit = self._kb.KANBAN_ATTACHMENT_MAX_BYTES
        for artifact in artifacts:
            path = Path(artifact)
            try:
                # The worker's file, read by a runner that may be root: no link followed,
                # no FIFO waited on, nothing read past Hermes's own cap.
                data = files.read_workers(path, limit)
                if len(data) > limit:
                    raise self._kb.AttachmentTooLarge(f"over {limit} bytes")
                self._kb.store_attachment_bytes(
                    connection, task_id, path.name, data, uploaded_by=AUTHOR, board=self.slug,
                )
            except (OSError, ValueError) as error:  # AttachmentTooLarge is a ValueError
                log.warning("task %s: artifact %s not attached: %s", task_id, path, error)

    @staticmethod
    def _settled(
        connection: sqlite3.Connection,
        task_id: str,
        run_id: int,
        digest: str | None,
        result: dict[str, Any],
    ) -> CompleteOutcome:
        """Not completed now: ``duplicate`` if this very run already completed it, else stale.

        A run that ended ``completed`` with this journal digest took this result, whatever
        the task did since (sent to review, reviewed, sent back): a duplicate."""
        own = connection.execute(
            "SELECT metadata FROM task_runs WHERE id = ? AND outcome = 'completed'", (run_id,)
        ).fetchone()
        if own is not None and digest is not None and (
            rows.mark(own["metadata"]).get("journal_digest") == digest
        ):
            return CompleteOutcome.DUPLICATE
        task = connection.execute(
            "SELECT status, result FROM tasks WHERE id = ?", (task_id,)
        ).fetchone()
        done_by = connection.execute(
            "SELECT id, metadata FROM task_runs WHERE task_id = ? AND outcome = 'completed' "
            "ORDER BY id DESC LIMIT 1",
            (task_id,),
        ).fetchone()
        if task is None or task["status"] != "done" or done_by is None or done_by["id"] != run_id:
            return CompleteOutcome.STALE
        ours = rows.mark(done_by["metadata"])
        if digest is not None and ours.get("journal_digest") is not None:
            same = ours["journal_digest"] == digest
        else:
            same = rules.same_result(rows.result_of(task["result"]), result)
        return CompleteOutcome.DUPLICATE if same else CompleteOutcome.STALE
