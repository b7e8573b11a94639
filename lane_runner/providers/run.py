"""One provider attempt end to end: argv, supervised run, verdict.

The session fallbacks (a claude id "already in use" resumed, an unknown thread or
conversation started fresh) are each CLI's own: its adapter's ``attempt`` drives
them (``providers/adapter.py``); this module runs each start it asks for.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lane_runner import clock
from lane_runner.providers import worker_files
from lane_runner.providers.adapter import Provider
from lane_runner.providers.classify import classify_failure, gave_up
from lane_runner.providers.model import Attempt, Classification, ProviderRequest
from lane_runner.providers.reading import Reading
from lane_runner.providers.registry import adapter
from lane_runner.providers.sandbox import Request as SandboxRequest
from lane_runner.providers.sandbox import SandboxRefused, Started, sandboxed
from lane_runner.providers.supervisor import Ended, Limits, Supervisor
from lane_runner.providers.tasklog import TaskLog
from schemas import first_error

log = logging.getLogger(__name__)


def run_attempt(req: ProviderRequest) -> Attempt:
    """Run ``req`` with its provider's adapter; ValueError for a provider none has."""
    cli = adapter(req.provider)
    if not req.simulated:
        try:
            cli.prepare(req)
            if req.isolated:
                worker_files.settle(cli.settled_files(req.env), req.run_as)
        except OSError as error:
            # Started without them, the CLI would run outside the posture docs/security.md
            # promises: the attempt is refused, and the runner falls back or waits.
            reason = f"{req.provider} cannot be started with the runner's deny list: {error}"
            return Attempt(Classification.MISCONFIGURED, reason, None, None, None, None, "")
    def run_once(argv: list[str], result_file: Path | None, prompt: str | None = None) -> Attempt:
        return _run(cli, req, argv, result_file, req.prompt if prompt is None else prompt)

    return cli.attempt(req, run_once)


def _run(
    cli: Provider, req: ProviderRequest, argv: list[str], result_file: Path | None, prompt: str
) -> Attempt:
    reading = Reading(session_id=req.session_id if req.resume else None, model=req.model,
                      zone=req.env.get("TZ"), clock=clock.now, shape=req.answer)

    def on_event(event: dict[str, Any]) -> bool:
        before = reading.session_id
        cli.track_tools(reading.tools, event)
        meaningful = cli.observe(reading, event)
        if reading.session_id and reading.session_id != before:
            req.on_session(reading.session_id)
        for report in reading.take_usage():
            req.on_usage(report)
        return meaningful

    task_log = TaskLog(req.log_path, req.rotate_bytes)
    try:
        task_log.note(f"starting {req.provider} {req.model}/{req.effort}: {_describe(argv)}")
        try:
            with _contained(cli, req, argv, result_file) as started:
                ended = Supervisor(
                    started.argv,
                    cwd=req.workspace,
                    env=started.env,
                    stdin=prompt.encode(),
                    task_log=task_log,
                    limits=Limits(
                        deadline=req.deadline,
                        heartbeat_interval=req.heartbeat_interval,
                        stall_timeout=req.stall_timeout,
                        kill_grace=req.kill_grace,
                        closing_grace=req.closing_grace,
                        tool_stall_timeout=req.tool_stall_timeout,
                        busy_cpu=req.busy_cpu,
                        cpu_interval=cpu_interval(req.stall_timeout),
                    ),
                    on_event=on_event,
                    answered=lambda: reading.finished,
                    in_flight=lambda: bool(reading.tools),
                    heartbeat=req.heartbeat,
                    cancel=req.cancel,
                    run_as=started.run_as,
                    on_progress=req.on_progress,
                    gave_up=lambda: gave_up(reading.signals),
                    on_stderr=lambda line: cli.observe_stderr(reading, line),
                ).run()
                answer_file = started.outside(result_file) if result_file else None
                file_answer = cli.file_result(answer_file) if answer_file else None
        except SandboxRefused as error:
            task_log.note(f"{req.provider} not started: {error}")
            return Attempt(Classification.FAILED, f"no sandbox for this attempt: {error}",
                           None, None, None, None, "")
        attempt = conclude(reading, ended, file_answer)
        attempt.argv, attempt.result_file, attempt.limit = argv, result_file, reading.limit
        task_log.note(f"{req.provider} ended: {attempt.classification}: {attempt.reason}")
    finally:
        task_log.close()
    return attempt


@contextlib.contextmanager
def _contained(
    cli: Provider, req: ProviderRequest, argv: list[str], result_file: Path | None
) -> Iterator[Started]:
    """How this start runs: in a sandbox of its own (``req.isolated``), else as it is."""
    env = {**req.env, **cli.run_env(req)}
    if not req.isolated:
        yield Started(argv, env, req.run_as)
        return
    request = SandboxRequest(
        argv=argv,
        env=env,
        cwd=req.workspace,
        worktree=req.worktree or req.workspace,
        executable=req.executable,
        run_as=req.run_as,
        allow=req.egress_allow,
        writable_homes=cli.writable_homes(req.env),
        settled=cli.settled_files(req.env),
        handed=[path for path in (req.schema_path, req.settings_path) if path.is_file()],
        result_dir=result_file.parent if result_file else None,
    )
    refused = f"{req.provider} in {req.workspace}: egress refused to %s (not in egress_allow)"
    with sandboxed(request, lambda where: log.warning(refused, where)) as started:
        yield started


def cpu_interval(stall_timeout: float) -> float:
    """How often an attempt's CPU time is read: every 30 s, or four times within a shorter
    ``stall_timeout``, so a busy tree is seen well before the stall clock runs out."""
    return min(30.0, stall_timeout / 4)


def _describe(argv: list[str]) -> str:
    """The argv for the log, with the (long) inline JSON schema elided."""
    return " ".join("<schema>" if arg.startswith("{") else arg for arg in argv)


def conclude(reading: Reading, ended: Ended, file_answer: dict[str, Any] | None) -> Attempt:
    """The verdict on a finished process (pure)."""
    signals = reading.signals
    signals.stderr = ended.stderr
    signals.exit_status, signals.signal = ended.exit_status, ended.signal
    if ended.closed_after_answer:
        signals.signal = None  # the supervisor's SIGTERM, not the CLI's failure
    classification, reason, structured = _verdict(reading, ended, file_answer or reading.candidate)
    return Attempt(
        classification=classification,
        reason=reason,
        structured=structured,
        exit_status=ended.exit_status,
        signal=ended.signal,
        session_id=reading.session_id,
        tail=ended.tail,
        repairable=classification is Classification.FAILED and _ended_clean(reading, ended)
        and not reading.signals.errors,
    )


def _ended_clean(reading: Reading, ended: Ended) -> bool:
    """The CLI ended its turn itself, well, and without saying it failed."""
    ended_well = ended.exit_status == 0 or ended.closed_after_answer
    return ended.stopped is None and ended_well and not reading.signals.result_is_error


def _verdict(
    reading: Reading, ended: Ended, answer: dict[str, Any] | None
) -> tuple[Classification, str, dict[str, Any] | None]:
    """Supervisor stops first (the CLI did not end on its own), then a clean end
    with a schema-valid answer, then CLI-level failure signals. A CLI closed after its
    final answer ended cleanly: the answer is its last word, not the exit status."""
    if ended.stopped is not None:
        return _stopped(reading, ended)
    clean = _ended_clean(reading, ended)
    if clean and answer is not None:
        shape = reading.shape
        problem = first_error(shape.schema, answer)
        if problem:
            return Classification.FAILED, f"invalid {shape.name}: {problem}", None
        return Classification.OK, f"{answer[shape.key]}: {str(answer['summary'])[:200]}", answer
    if clean and not reading.signals.errors:
        why = reading.unanswered or "CLI ended cleanly without a structured result"
        return Classification.FAILED, why, None
    classification, reason = classify_failure(reading.signals)
    return classification, reason, None


def _stopped(
    reading: Reading, ended: Ended
) -> tuple[Classification, str, dict[str, Any] | None]:
    """A CLI the supervisor stopped. A stall whose CLI last said its service has nothing
    left to give (opencode retries an exhausted quota for ever, printing only a log line)
    is that capacity problem, not a stall the task is blamed for."""
    assert ended.stopped is not None
    if ended.stopped is Classification.STALLED and reading.signals.errors:
        said, why = classify_failure(reading.signals)
        if said is Classification.CAPACITY:
            return said, f"{why} (then silent: {ended.stop_reason})", None
    return ended.stopped, ended.stop_reason, None
