"""Codex CLI adapter: ``codex exec --json`` argv and its event stream.

Events (codex-cli 0.171): ``thread.started{thread_id}`` first, ``turn.started``,
``item.started``/``item.completed`` (reasoning, command_execution, agent_message,
file_change, error...), then ``turn.completed{usage}`` or ``turn.failed{error}``.
Top-level ``{"type":"error"}`` events are transport chatter ("Reconnecting...")
or the final failure text; they never count as progress.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lane_runner import files
from lane_runner.providers.model import ProviderRequest
from lane_runner.providers.reading import Reading, result_object

log = logging.getLogger(__name__)

MAX_RESULT_FILE_BYTES = 1 << 20


def argv(req: ProviderRequest, *, thread_id: str | None, result_file: Path) -> list[str]:
    """New thread with ``thread_id`` None, else ``exec resume``; prompt comes on stdin (``-``).

    ``exec resume`` has no ``-C``: it runs in its working directory, which the
    supervisor sets to the workspace for both forms. ``--dangerously-bypass-hook-trust``
    lets the hooks a workspace enables run without a person persisting trust
    first: nobody is there to answer, and the workspace is the task's own.
    """
    common = [
        "--json",
        "-m",
        req.model,
        "-c",
        f'model_reasoning_effort="{req.effort}"',
        "--output-schema",
        str(req.schema_path),
        "-o",
        str(result_file),
    ]
    head = [
        str(req.executable),
        "--dangerously-bypass-approvals-and-sandbox",
        "--dangerously-bypass-hook-trust",
        "exec",
    ]
    if thread_id:
        return [*head, "resume", *common, thread_id, "-"]
    return [*head, *common, "-C", str(req.workspace), "-"]


def observe(reading: Reading, event: dict[str, Any]) -> bool:
    """Fold one event into ``reading``; True when it is meaningful progress."""
    kind = event.get("type")
    if kind == "thread.started":
        thread_id = event.get("thread_id")
        if isinstance(thread_id, str) and thread_id:
            reading.session_id = thread_id
        return True
    if kind == "error":
        reading.signals.add_error(str(event.get("message", "")))
        return False
    if kind == "turn.failed":
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        reading.signals.add_error(str(message or "turn failed"))
        reading.finished = True
        return True
    if kind == "turn.completed":
        reading.finished = True
        return True
    item = event.get("item")
    if isinstance(item, dict) and item.get("type") == "error":
        return False  # a warning item ("Falling back from WebSockets..."): not work
    if kind == "item.completed" and isinstance(item, dict) and item.get("type") == "agent_message":
        reading.candidate = result_object(item.get("text")) or reading.candidate
    return True


def file_result(result_file: Path) -> dict[str, Any] | None:
    """The ``-o`` file's result object: the authoritative answer when present."""
    try:
        # The worker may own this directory: a link or FIFO there is moved aside, not read.
        data = files.read(result_file, MAX_RESULT_FILE_BYTES)
    except FileNotFoundError:
        return None
    except OSError as error:
        log.warning(
            "codex result file %s unreadable, the stream's answer stands: %s", result_file, error
        )
        return None
    if len(data) > MAX_RESULT_FILE_BYTES:
        log.warning(
            "codex result file %s exceeds %d bytes; ignored", result_file, MAX_RESULT_FILE_BYTES
        )
        return None
    return result_object(data.decode("utf-8", "replace"))
