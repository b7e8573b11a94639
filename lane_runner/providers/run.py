"""One provider attempt end to end: argv, supervised run, verdict, session fallbacks.

Session fallbacks live here because they are a property of the CLIs, not of
the daemon: a claude id that is "already in use" on a fresh start is resumed,
one with "no conversation found" on resume is started fresh with the same
reserved id, and a codex thread with "no rollout found" is replaced by a new
thread (reported through ``on_session``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lane_runner import clock
from lane_runner.providers import claude, codex
from lane_runner.providers.classify import classify_failure, gave_up
from lane_runner.providers.model import Attempt, Classification, ProviderRequest
from lane_runner.providers.reading import Reading
from lane_runner.providers.supervisor import Ended, Limits, Supervisor
from lane_runner.providers.tasklog import TaskLog
from schemas import first_error

RESULT_SCHEMA = "worker-result.schema.json"


def run_attempt(req: ProviderRequest) -> Attempt:
    if req.provider == "codex":
        return _codex_attempt(req)
    if req.provider == "claude":
        return _claude_attempt(req)
    raise ValueError(f"unknown provider {req.provider!r}")


def _codex_attempt(req: ProviderRequest) -> Attempt:
    thread_id = req.session_id if req.resume else None
    attempt = _run(req, codex.argv(req, thread_id=thread_id, result_file=req.result_file),
                   req.result_file)
    if thread_id and attempt.classification is Classification.SESSION_MISSING:
        retry_file = req.retry_result_file or _sibling(req.result_file, "fresh")
        attempt = _run(req, codex.argv(req, thread_id=None, result_file=retry_file), retry_file)
    return attempt


def _claude_attempt(req: ProviderRequest) -> Attempt:
    if not req.session_id:
        raise ValueError("claude needs a reserved session id, persisted before the first start")
    schema_text = req.schema_path.read_text(encoding="utf-8")

    def once(resume: bool) -> Attempt:
        argv = claude.argv(req, session_id=str(req.session_id), resume=resume,
                           schema_text=schema_text)
        return _run(req, argv, None)

    attempt = once(req.resume)
    if not req.resume and attempt.classification is Classification.SESSION_COLLISION:
        attempt = once(True)
    elif req.resume and attempt.classification is Classification.SESSION_MISSING:
        attempt = once(False)
    if attempt.session_id is None:
        attempt.session_id = req.session_id
    return attempt


def _sibling(path: Path, label: str) -> Path:
    stem, dot, suffix = path.name.partition(".result.json")
    name = f"{stem}.{label}.result.json" if dot else f"{path.name}.{label}"
    return path.with_name(name)


def _run(req: ProviderRequest, argv: list[str], result_file: Path | None) -> Attempt:
    reading = Reading(session_id=req.session_id if req.resume else None, model=req.model,
                      zone=req.env.get("TZ"), clock=clock.now)
    observe = codex.observe if req.provider == "codex" else claude.observe

    def on_event(event: dict[str, Any]) -> bool:
        before = reading.session_id
        meaningful = observe(reading, event)
        if reading.session_id and reading.session_id != before:
            req.on_session(reading.session_id)
        for report in reading.take_usage():
            req.on_usage(report)
        return meaningful

    task_log = TaskLog(req.log_path, req.rotate_bytes)
    try:
        task_log.note(f"starting {req.provider} {req.model}/{req.effort}: {_describe(argv)}")
        ended = Supervisor(
            argv,
            cwd=req.workspace,
            env=req.env,
            stdin=req.prompt.encode(),
            task_log=task_log,
            limits=Limits(
                deadline=req.deadline,
                heartbeat_interval=req.heartbeat_interval,
                stall_timeout=req.stall_timeout,
                kill_grace=req.kill_grace,
                closing_grace=req.closing_grace,
            ),
            on_event=on_event,
            answered=lambda: reading.finished,
            heartbeat=req.heartbeat,
            cancel=req.cancel,
            run_as=req.run_as,
            on_progress=req.on_progress,
            gave_up=lambda: gave_up(reading.signals),
        ).run()
        file_answer = codex.file_result(result_file) if result_file else None
        attempt = conclude(reading, ended, file_answer)
        attempt.argv, attempt.result_file, attempt.limit = argv, result_file, reading.limit
        task_log.note(f"{req.provider} ended: {attempt.classification}: {attempt.reason}")
    finally:
        task_log.close()
    return attempt


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
    )


def _verdict(
    reading: Reading, ended: Ended, answer: dict[str, Any] | None
) -> tuple[Classification, str, dict[str, Any] | None]:
    """Supervisor stops first (the CLI did not end on its own), then a clean end
    with a schema-valid answer, then CLI-level failure signals. A CLI closed after its
    final answer ended cleanly: the answer is its last word, not the exit status."""
    if ended.stopped is not None:
        return ended.stopped, ended.stop_reason, None
    ended_well = ended.exit_status == 0 or ended.closed_after_answer
    clean = ended_well and not reading.signals.result_is_error
    if clean and answer is not None:
        problem = first_error(RESULT_SCHEMA, answer)
        if problem:
            return Classification.FAILED, f"invalid worker result: {problem}", None
        return Classification.OK, f"{answer['status']}: {str(answer['summary'])[:200]}", answer
    if clean and not reading.signals.errors:
        why = reading.unanswered or "CLI ended cleanly without a structured result"
        return Classification.FAILED, why, None
    classification, reason = classify_failure(reading.signals)
    return classification, reason, None
