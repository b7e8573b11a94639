"""A task's provider log, rendered for people (``lane-runner logs``).

The log holds the CLIs' JSONL events as they came, ``[stderr]`` lines and the
runner's own timestamped notes. Each line becomes one readable line; tool
calls are summarised to their command or path; lines that are not events pass
through unchanged. Pure: text in, text out.
"""

from __future__ import annotations

from typing import Any

import orjson

WIDTH = 200


def _short(text: Any, width: int = WIDTH) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def render(line: str) -> str | None:
    """One log line for people; None for events that say nothing (turn/step markers)."""
    if not line.startswith("{"):
        return line
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        return line
    if not isinstance(event, dict):
        return line
    kind = event.get("type")
    if isinstance(kind, str) and (
        kind.startswith(("thread.", "turn.", "item.")) or kind == "error"
    ):
        return _codex(kind, event)
    return _claude(kind, event)


def _codex(kind: str, event: dict[str, Any]) -> str | None:
    item = _mapping(event.get("item"))
    if kind == "thread.started":
        return f"codex thread {event.get('thread_id')}"
    if kind == "turn.completed":
        usage = _mapping(event.get("usage"))
        tokens = f"tokens in {usage.get('input_tokens')}, out {usage.get('output_tokens')}"
        return f"turn completed ({tokens})"
    if kind == "turn.failed":
        error = event.get("error")
        return f"turn FAILED: {_short(error.get('message') if isinstance(error, dict) else error)}"
    if kind == "error":
        return f"error: {_short(event.get('message'))}"
    if kind != "item.completed":
        return None
    what = item.get("type")
    if what == "command_execution":
        return f"$ {_short(item.get('command'))} (exit {item.get('exit_code')})"
    if what == "file_change":
        changes = item.get("changes") or []
        paths = ", ".join(str(c.get("path")) for c in changes if isinstance(c, dict))
        return f"edit {_short(paths)}"
    if what == "agent_message":
        return f"codex: {_short(item.get('text'))}"
    if what == "reasoning":
        return f"(thinking) {_short(item.get('text'))}"
    return f"{what}: {_short(item.get('text') or item.get('message') or '')}"


def _claude(kind: Any, event: dict[str, Any]) -> str | None:
    if kind == "system":
        if event.get("subtype") == "init":
            return f"claude session {event.get('session_id')} ({event.get('model')})"
        return f"system {event.get('subtype')}"
    if kind == "result":
        verdict = "FAILED" if event.get("is_error") else "done"
        return f"result {verdict}: {_short(event.get('result'))}"
    message = event.get("message")
    if kind not in ("assistant", "user") or not isinstance(message, dict):
        return _short(orjson.dumps(event).decode())
    parts = [_part(kind, part) for part in message.get("content") or [] if isinstance(part, dict)]
    shown = [part for part in parts if part]
    return "\n".join(shown) if shown else None


def _part(kind: str, part: dict[str, Any]) -> str | None:
    what = part.get("type")
    if what == "text":
        return f"claude: {_short(part.get('text'))}"
    if what == "thinking":
        return f"(thinking) {_short(part.get('thinking'))}"
    if what == "tool_use":
        arguments = _mapping(part.get("input"))
        target = arguments.get("command") or arguments.get("file_path") or arguments.get("pattern")
        return f"tool {part.get('name')}: {_short(target or orjson.dumps(arguments).decode())}"
    if what == "tool_result":
        content = part.get("content")
        size = len(content) if isinstance(content, str) else len(orjson.dumps(content))
        return f"  -> tool result ({size} chars){' ERROR' if part.get('is_error') else ''}"
    return None if kind == "user" else f"{what}"
