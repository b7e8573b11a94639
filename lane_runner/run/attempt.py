"""One provider attempt of a run (docs/ARCHITECTURE.md §1): planned (``plan``, shared
with the dry run), recorded in the lane state before it starts, its request with the
run's callbacks (heartbeat, session, usage, progress), its result files cleared before
and settled after, its candidate answer kept, its provider's health recorded
(``decide.health_after``), and its answer judged (``judging``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

from journal import Document
from journal import names as journal_names
from lane_runner import clock, files
from lane_runner.board import rules
from lane_runner.home import REVIEW_WIRE_SCHEMA
from lane_runner.names import PROVIDERS
from lane_runner.providers import (
    REVIEW_ANSWER,
    Attempt,
    Classification,
    ProviderRequest,
    run_attempt,
    worker_environment,
)
from lane_runner.router import Route, RoutingError, health
from lane_runner.run import command, decide, git, judging, ownership, plan
from lane_runner.run.claimed import Claimed
from lane_runner.run.context import Prompts
from lane_runner.run.lease import Lease
from lane_runner.run.notebook import Notebook
from lane_runner.run.spending import Spending
from lane_runner.run.verification import IMPLEMENT
from lane_runner.service import breaker, leftovers, logs, metrics
from lane_runner.usage.record import Role

log = logging.getLogger(__name__)


class Attempts:
    def __init__(
        self, claimed: Claimed, notebook: Notebook, spending: Spending, lease: Lease
    ) -> None:
        self.c, self.notebook, self.spending, self.lease = claimed, notebook, spending, lease
        self.verdict: dict[str, Any] = {}  # the judge's word on the latest completed answer

    def attempt(
        self, route: Route, prompt: str | Prompts, worktree: Path, turn: int,
        role: Role = IMPLEMENT,
    ) -> Attempt:
        """One provider turn, recorded in the lane state, provider health and metrics. A
        reviewer's (``role`` review) starts a session of its own and leaves the task's
        provider and sessions as they were: the implementer resumes after it."""
        c = self.c
        implements = role == IMPLEMENT
        sessions, started = (c.state.sessions, c.state.started) if implements else ({}, {})
        planned = plan.plan_attempt(route, c.cfg, c.s.home, c.tools.binaries, sessions, started)
        prompts = prompt if isinstance(prompt, Prompts) else Prompts(prompt)
        told, whole = self._told(planned, prompts)
        if planned.session_id is not None:  # resumed or reserved: known before the start
            logs.bind_session(planned.session_id)
        n = c.state.next_sequence()
        # A fresh session after an unknown-session resume writes its own result file.
        retry = c.state.next_sequence() if planned.cli.writes_result_file else None
        if implements and planned.reserved and planned.session_id is not None:
            c.state.sessions[route.provider] = planned.session_id  # saved before the start
        if implements:
            c.state.provider = route.provider
            if prompts.context:
                c.state.told[route.provider] = prompts.context  # saved before the start
        record = self._begun(n, route, turn, role)
        if planned.unusable is not None or planned.executable is None:
            unusable = planned.unusable or f"the {route.provider} CLI is not installed"
            attempt = Attempt(Classification.UNUSABLE, unusable, None, None, None, None, "")
        else:
            request = self._request(planned, planned.executable, told, worktree, n, retry,
                                    role)
            request = dataclasses.replace(request, whole_prompt=whole)
            if not implements:
                request = dataclasses.replace(
                    request, answer=REVIEW_ANSWER, schema_path=c.s.home.root / REVIEW_WIRE_SCHEMA,
                    on_session=logs.bind_session,
                )
            attempt = self._run(request, n, retry, keeps_session=implements)
        self._ended(record, n, attempt)
        metrics.attempt_ended(route.provider, attempt.classification)
        self._record_health(route.provider, attempt)
        return attempt

    def _told(self, planned: plan.AttemptPlan, prompts: Prompts) -> tuple[str, str | None]:
        """What this start is told, and what a fresh session after a lost one would be: a
        session resumed that was told this task's context gets only what is new; any other
        start gets the whole prompt."""
        return prompts.chosen(planned.resume, self.c.state.told.get(planned.provider))

    def _begun(self, n: int, route: Route, turn: int, role: Role) -> dict[str, Any]:
        """The attempt's record in the lane state, saved before it starts."""
        record: dict[str, Any] = {
            "n": n,
            "run_id": self.c.run.id,
            "provider": route.provider,
            "model": route.model,
            "effort": route.effort,
            "turn": turn,
            "started_at": time.time(),
            "ended_at": None,
            "classification": None,
            "reason": None,
            "role": role,
        }
        self.c.state.attempts.append(record)
        self.notebook.save()
        return record

    def _run(
        self, request: ProviderRequest, n: int, retry: int | None, *, keeps_session: bool
    ) -> Attempt:
        """The CLI's run under the supervisor; its session kept for the next attempt."""
        provider = request.provider
        try:
            attempt = _storable(run_attempt(request))
        finally:
            self._settle_result_files(n, retry)
        if not keeps_session:
            return attempt
        self.c.state.started[provider] = True
        if attempt.session_id:
            self.c.state.sessions[provider] = attempt.session_id
        return attempt

    def _ended(self, record: dict[str, Any], n: int, attempt: Attempt) -> None:
        """The attempt's end in the lane state, and its answer kept as a candidate, at once."""
        c = self.c
        record.update(
            ended_at=time.time(),
            classification=attempt.classification.value,
            reason=attempt.reason[:2000],
        )
        ended = [self.notebook.document()]
        if attempt.structured is not None:
            candidate = journal_names.candidate(c.task.id, c.run.id, n)
            ended.append(Document(candidate, attempt.structured, new=True))
        c.s.journal.write_documents(c.task.board, ended)

    def _request(
        self,
        planned: plan.AttemptPlan,
        executable: Path,
        prompt: str,
        worktree: Path,
        n: int,
        retry: int | None,
        role: Role,
    ) -> ProviderRequest:
        c, settings = self.c, self.c.settings
        provider, route = planned.provider, planned.route
        c.s.activity.update(c.run.id, provider=provider, model=route.model, effort=route.effort)
        environment = {
            **planned.settings, **leftovers.markers(c.s.node, c.s.home.root), **git.GIT_ENV,
        }
        request = plan.request(
            planned,
            settings.supervisor,
            executable=executable,
            prompt=prompt,
            workspace=worktree,
            schema_path=c.s.schema_path,
            result_file=self._fresh_result_file(n),
            retry_result_file=None if retry is None else self._fresh_result_file(retry),
            log_path=c.s.home.log_file(c.task.board, c.task.id),
            env=worker_environment(
                provider, command.home_of(settings.worker.user), environment,
                passes=settings.worker.env,
            ),
            deadline=c.deadline,
            worktree=c.worktree,
        )
        return dataclasses.replace(
            request,
            heartbeat=self.lease.heartbeat,
            on_session=lambda value: self._on_session(provider, value),
            on_usage=lambda report: self.spending.on_usage(provider, n, report, role),
            max_budget_usd=self.spending.dollars_left(),
            cancel=c.cancel,
            on_progress=lambda progress: c.s.activity.progress(c.run.id, progress),
        )

    def _result_file(self, n: int) -> Path:
        """Where the CLI writes its answer in attempt ``n`` (``plan.result_file``)."""
        return plan.result_file(self.c.cfg, self.c.s.home, self.c.task, self.c.run.id, n)

    def _fresh_result_file(self, n: int) -> Path:
        """Attempt ``n``'s result file name, cleared of anything planted there: the CLI
        must not write through a link or block on a FIFO, and no stale answer is read."""
        path = self._result_file(n)
        user = self.c.settings.worker.user
        try:
            if self.c.cfg.worker_users and user:
                ownership.outbox(path.parent, user)
            files.clear(path)
        except OSError as error:  # the attempt still runs: the stream's answer stands
            log.warning("cannot clear %s before the attempt: %s", path, error)
        return path

    def _settle_result_files(self, *attempts: int | None) -> None:
        """A worker's result files go (the answer is the candidate now); the CLI's own, in
        the journal's directory, are made private (the CLI wrote them with its umask)."""
        for n in attempts:
            if n is None:
                continue
            path = self._result_file(n)
            if self.c.settings.worker.user:
                path.unlink(missing_ok=True)
                continue
            try:
                files.make_private(path)  # none when the CLI failed before its answer
            except OSError as error:  # a mode is no reason to fail the attempt
                log.warning("cannot make %s private: %s", path, error)

    def _on_session(self, provider: str, session_id: str) -> None:
        """Persist a new session id the moment it appears, so a crash right after can resume it."""
        logs.bind_session(session_id)
        self.c.s.activity.update(self.c.run.id, session_id=session_id)
        self.c.state.sessions[provider] = session_id
        self.c.state.started[provider] = True
        self.notebook.save()

    def _record_health(self, provider: str, attempt: Attempt) -> None:
        """Carry out ``decide.health_after``: the provider's health file, and a comment for a
        usage limit."""
        directory, now = self.c.s.home.provider_health, clock.now()
        note = decide.health_after(attempt.classification, attempt.reason, attempt.limit, now)
        if note is None:
            return
        if note.said is decide.Said.LIMIT:
            health.record_limit(directory, provider, note.words, note.resets_at, now)
            self.notebook.note(f"{provider}: {note.words}")
        elif note.said is decide.Said.FAILURE:
            health.record_failure(directory, provider, note.kind, note.words)
        else:
            health.record_success(directory, provider)
            self.c.s.breaker.succeeded(breaker.scope(breaker.PROVIDER, provider))

    def judge(self, task_context: str, attempt: Attempt, turn: int) -> tuple[bool, str]:
        """Every completed answer passes the structural check (no blockers, a summary that
        claims no unfinished work); in goal mode the configured judge has the last word."""
        c, result = self.c, attempt.structured
        look = judging.first_look(result, c.task.goal_turns)
        if result is None or look is None:
            return False, ""
        verdict, judge = look.verdict, "structural"
        if look.asks_judge:
            judge = c.settings.judge or "structural"
            said = judging.context(task_context, turn, c.task.goal_turns, c.state.goal_rejections)
            try:
                verdict = c.tools.judge.judge(said, result)
            except RoutingError as error:
                log.warning("judge unavailable (%s); falling back to the structural judge", error)
                judge = "structural"
        self.verdict = judging.record(judge, verdict)
        return verdict.accepted, verdict.reason

    def limit_wait(self) -> tuple[float, str] | None:
        """When every provider this runner can start is under a usage limit whose reset
        its CLI named: the earliest reset, and why (``router/health.py``). A provider
        with no CLI here is no way out of the wait."""
        healths = health.read_all(self.c.s.home.provider_health)
        usable = [p for p in PROVIDERS if self.c.tools.binaries.get(p) is not None]
        return health.limit_wait(usable, healths, clock.now())


def _storable(attempt: Attempt) -> Attempt:
    """The provider's words as every board can store them (see ``rules.storable``)."""
    attempt.structured = rules.storable(attempt.structured)
    attempt.reason = rules.storable(attempt.reason)
    return attempt
