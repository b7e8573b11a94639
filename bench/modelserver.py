"""A scripted model server: the two streaming APIs the real CLIs speak, answering by script.

- OpenAI Responses (codex with a custom model provider): ``POST {base}/responses``,
  answered as server-sent events (``response.created``, ``response.output_item.done``
  with a ``function_call`` to ``exec_command`` or an assistant ``message``,
  ``response.completed`` with usage).
- Anthropic Messages (Claude Code with ``ANTHROPIC_BASE_URL``): ``POST
  {base}/v1/messages?beta=true``, streamed (``message_start``, ``content_block_*``,
  ``message_delta`` with usage, ``message_stop``) or, when a request does not ask
  for a stream (claude's retry after a broken stream), one JSON message.
- OpenAI Chat Completions (opencode with a custom ``@ai-sdk/openai-compatible``
  provider): ``POST {base}/chat/completions``, streamed as ``chat.completion.chunk``
  deltas (text, or one ``tool_calls`` entry for its ``bash`` tool), the usage in a
  last chunk without choices, then ``data: [DONE]``.
- Gemini (the Gemini CLI with ``GOOGLE_GEMINI_BASE_URL``): ``POST
  {base}/v1beta/models/<model>:streamGenerateContent?alt=sse`` (and the unstreamed
  ``:generateContent``), each answer one ``GenerateContentResponse`` with a
  ``functionCall`` to ``run_shell_command`` or a text part, and ``usageMetadata``.

The script is a JSON file (``--script``), read again on every request so a test can
add tasks while the server runs::

    {"tasks": {"<marker>": {"codex": [step, ...], "claude": [step, ...]}}}

A request belongs to the task whose marker appears in its body (the task's title is
in every prompt). Its *turn* is the number of tool results in the conversation it
carries, so a CLI that resumes a session after a crash continues where the history
says, and a retry of the same request gets the same step. Step ``turn`` answers turn
``turn``; past the last step the model just ends its turn with a short text. A step
is one reply, or ``{"attempts": [reply, ...]}``: the n-th request of that turn gets
the n-th reply (the last one repeats). Replies:

- ``{"shell": "<command>"}``: run a command (codex ``exec_command``, claude ``Bash``,
  opencode ``bash``, gemini ``run_shell_command``);
- ``{"write": {"path": "<relative>", "content": "..."}}``: claude's ``Write`` tool;
- ``{"answer": {...}}``: the final answer (claude: a ``StructuredOutput`` call; codex:
  the JSON as the message text, which ``--output-schema`` asks for; opencode and
  gemini: the JSON as the text, which the runner's prompt asks for);
- ``{"say": "<text>"}``: a plain text answer that ends the turn;
- ``{"error": {"status": 429, "body": {...}, "headers": {...}}}``: an HTTP error;
- ``{"hang": true}``: never send a header (until the client goes away);
- ``{"cut": reply}``: start streaming ``reply`` and drop the connection midway.

A reply that answers may carry ``"usage"``: the token counts its response reports
(codex, opencode, gemini: ``input``, ``cached``, ``output``, ``reasoning``;
claude: ``input``, ``cache_read``, ``cache_write``, ``output``); by default
``1000 * (turn + 1)`` input and 50 output. The log's ``usage`` is what a whole answer
reported (None otherwise).

Every request is logged as one JSON line (``--log``): the provider, marker, turn, the
reply given and the whole body the CLI sent. Standard library only, so it also runs
by hand: ``python3 modelserver.py --script s.json --log l.jsonl --port 8080``.
With ``--loopback-up`` it first brings up ``lo`` (it is then the first process of a
network namespace of its own, see ``netns.py``).
"""

from __future__ import annotations

import argparse
import fcntl
import http.server
import json
import re
import select
import socket
import struct
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ANTHROPIC_PATH = "/v1/messages"
RESPONSES_SUFFIX = "/responses"
CHAT_SUFFIX = "/chat/completions"
GEMINI_PATH = re.compile(r"^/v1(?:beta|alpha)?/models/(?P<model>[^:/]+):(?P<method>\w+)$")
#: How a model would find its working directory in Claude Code's request.
WORKING_DIRECTORY = re.compile(r"Primary working directory: (\S+)")


class Script:
    """The tasks' steps, read from the file on every request, and how far each got."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.seen: dict[tuple[str, str, int], int] = {}

    def tasks(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.path.read_text())["tasks"])
        except (OSError, ValueError, KeyError):
            return {}

    def reply(self, provider: str, raw: str, turn: int) -> tuple[str | None, int, dict[str, Any]]:
        """(marker, attempt number, reply) for a request of ``provider`` at ``turn``."""
        found = next(((m, steps) for m, steps in self.tasks().items() if m in raw), None)
        if found is None:
            return None, 0, {"error": {"status": 404, "body": {"error": "no script"}}}
        marker, steps = found
        mine = steps.get(provider) or []
        with self.lock:
            key = (marker, provider, turn)
            attempt = self.seen.get(key, 0)
            self.seen[key] = attempt + 1
        if turn >= len(mine):
            return marker, attempt, {"say": "Done."}
        step = mine[turn]
        if "attempts" in step:
            replies = step["attempts"]
            return marker, attempt, replies[min(attempt, len(replies) - 1)]
        return marker, attempt, step


class Log:
    def __init__(self, path: Path) -> None:
        self.file = path.open("a", encoding="utf-8")
        self.lock = threading.Lock()

    def write(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.file.write(json.dumps(entry) + "\n")
            self.file.flush()


def sse(events: list[dict[str, Any]]) -> list[bytes]:
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:20]}"


# -- OpenAI Responses ------------------------------------------------------------------


def responses_turn(body: dict[str, Any]) -> int:
    return sum(1 for item in body.get("input") or [] if item.get("type") == "function_call_output")


def counts(reply: dict[str, Any], turn: int) -> dict[str, int]:
    """The token counts a reply's response reports (see the module's docstring)."""
    given = reply.get("usage") or {}
    return {"input": 1000 * (turn + 1), "output": 50, "cached": 0, "reasoning": 0,
            "cache_read": 0, "cache_write": 0, **given}


def responses_usage(reply: dict[str, Any], turn: int) -> dict[str, Any]:
    """OpenAI's usage: ``input_tokens`` includes the cached ones, output the reasoning."""
    n = counts(reply, turn)
    return {"input_tokens": n["input"], "input_tokens_details": {"cached_tokens": n["cached"]},
            "output_tokens": n["output"],
            "output_tokens_details": {"reasoning_tokens": n["reasoning"]},
            "total_tokens": n["input"] + n["output"]}


def messages_usage(reply: dict[str, Any], turn: int) -> dict[str, int]:
    """Anthropic's usage: input, cache reads and cache writes are apart."""
    n = counts(reply, turn)
    return {"input_tokens": n["input"], "output_tokens": n["output"],
            "cache_creation_input_tokens": n["cache_write"],
            "cache_read_input_tokens": n["cache_read"]}


def responses_events(reply: dict[str, Any], turn: int) -> list[dict[str, Any]]:
    """The Responses stream for one reply: output items, then ``response.completed``."""
    response_id = _id("resp")
    if "shell" in reply:
        arguments = json.dumps({"cmd": reply["shell"], "yield_time_ms": 10000})
        item = {"type": "function_call", "id": _id("fc"), "call_id": _id("call"),
                "name": "exec_command", "arguments": arguments}
    else:
        text = json.dumps(reply["answer"]) if "answer" in reply else str(reply.get("say", ""))
        item = {"type": "message", "role": "assistant", "id": _id("msg"),
                "content": [{"type": "output_text", "text": text}]}
    usage = responses_usage(reply, turn)
    return [
        {"type": "response.created", "response": {"id": response_id}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {"id": response_id, "usage": usage}},
    ]


# -- Anthropic Messages ----------------------------------------------------------------


def messages_turn(body: dict[str, Any]) -> int:
    turns = 0
    for message in body.get("messages") or []:
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            turns += sum(1 for block in content if block.get("type") == "tool_result")
    return turns


def _texts(body: dict[str, Any]) -> str:
    """The text blocks of a Messages request, where Claude Code states its working directory."""
    return "\n".join(
        block.get("text", "")
        for message in body.get("messages") or []
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "text"
    )


def messages_content(
    reply: dict[str, Any], body: dict[str, Any]
) -> tuple[list[dict[str, Any]], str]:
    """The content blocks and stop reason of one reply."""
    if "shell" in reply:
        tool = {"command": reply["shell"], "description": "Run a command"}
        return [_tool_use("Bash", tool)], "tool_use"
    if "write" in reply:
        found = WORKING_DIRECTORY.search(_texts(body))
        base = found.group(1) if found else "."
        path = f"{base}/{reply['write']['path']}"
        return [_tool_use("Write", {"file_path": path, "content": reply["write"]["content"]})], (
            "tool_use"
        )
    if "answer" in reply:
        return [_tool_use("StructuredOutput", reply["answer"])], "tool_use"
    return [{"type": "text", "text": str(reply.get("say", ""))}], "end_turn"


def _tool_use(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": _id("toolu"), "name": name, "input": arguments}


def messages_message(body: dict[str, Any], content: list[dict[str, Any]], stop: str,
                     turn: int, reply: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": _id("msg"), "type": "message", "role": "assistant",
        "model": body.get("model", "claude"), "content": content, "stop_reason": stop,
        "stop_sequence": None,
        "usage": messages_usage(reply, turn),
    }


def messages_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    start = dict(message, content=[], stop_reason=None,
                 usage=dict(message["usage"], output_tokens=1))
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            events += [
                {"type": "content_block_start", "index": index,
                 "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": index,
                 "delta": {"type": "text_delta", "text": block["text"]}},
            ]
        else:
            events += [
                {"type": "content_block_start", "index": index,
                 "content_block": dict(block, input={})},
                {"type": "content_block_delta", "index": index,
                 "delta": {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}},
            ]
        events.append({"type": "content_block_stop", "index": index})
    return [
        *events,
        {"type": "message_delta", "delta": {"stop_reason": message["stop_reason"],
                                            "stop_sequence": None},
         "usage": {"output_tokens": message["usage"]["output_tokens"]}},
        {"type": "message_stop"},
    ]


# -- OpenAI Chat Completions (opencode) ----------------------------------------------


def chat_turn(body: dict[str, Any]) -> int:
    return sum(1 for message in body.get("messages") or [] if message.get("role") == "tool")


def chat_usage(reply: dict[str, Any], turn: int) -> dict[str, Any]:
    """Chat Completions' usage: ``prompt_tokens`` includes the cached ones."""
    n = counts(reply, turn)
    return {"prompt_tokens": n["input"], "completion_tokens": n["output"],
            "total_tokens": n["input"] + n["output"],
            "prompt_tokens_details": {"cached_tokens": n["cached"]},
            "completion_tokens_details": {"reasoning_tokens": n["reasoning"]}}


def chat_chunks(reply: dict[str, Any], turn: int, model: str) -> list[bytes]:
    """One reply as ``chat.completion.chunk`` events: the delta, the finish, the usage."""
    base = {"id": _id("chatcmpl"), "object": "chat.completion.chunk",
            "created": int(time.time()), "model": model}
    if "shell" in reply:
        arguments = json.dumps({"command": reply["shell"], "description": "Run a command"})
        call = {"index": 0, "id": _id("call"), "type": "function",
                "function": {"name": "bash", "arguments": arguments}}
        delta: dict[str, Any] = {"role": "assistant", "tool_calls": [call]}
        finish = "tool_calls"
    else:
        text = json.dumps(reply["answer"]) if "answer" in reply else str(reply.get("say", ""))
        delta, finish = {"role": "assistant", "content": text}, "stop"
    chunks = [
        dict(base, choices=[{"index": 0, "delta": delta, "finish_reason": None}]),
        dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]),
        dict(base, choices=[], usage=chat_usage(reply, turn)),
    ]
    return [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks] + [b"data: [DONE]\n\n"]


# -- Gemini generateContent ----------------------------------------------------------------


def gemini_turn(body: dict[str, Any]) -> int:
    """The model's function calls so far: gemini, resumed after a kill, may carry one tool
    result twice (the first as it ran, then again as the resumed history has it)."""
    return sum(1 for content in body.get("contents") or [] for part in content.get("parts") or []
               if "functionCall" in part)


def gemini_usage(reply: dict[str, Any], turn: int) -> dict[str, int]:
    """Gemini's ``usageMetadata``: the prompt count includes the cached part; thoughts
    are counted apart from the candidates."""
    n = counts(reply, turn)
    return {"promptTokenCount": n["input"], "candidatesTokenCount": n["output"],
            "cachedContentTokenCount": n["cached"], "thoughtsTokenCount": n["reasoning"],
            "totalTokenCount": n["input"] + n["output"] + n["reasoning"]}


def gemini_response(reply: dict[str, Any], turn: int, model: str) -> dict[str, Any]:
    if "shell" in reply:
        part: dict[str, Any] = {"functionCall": {"name": "run_shell_command", "args": {
            "command": reply["shell"], "description": "Run a command"}}}
    else:
        text = json.dumps(reply["answer"]) if "answer" in reply else str(reply.get("say", ""))
        part = {"text": text}
    return {"candidates": [{"content": {"role": "model", "parts": [part]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": gemini_usage(reply, turn), "modelVersion": model,
            "responseId": _id("resp")}


# -- the HTTP side -----------------------------------------------------------------------


#: What each provider's answer reports as its usage, for the log.
USAGE = {"codex": responses_usage, "claude": messages_usage, "opencode": chat_usage,
         "gemini": gemini_usage}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        return None  # every request is in the JSON log instead

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace")
        try:
            body = json.loads(raw)
        except ValueError:
            body = {}
        path = self.path.split("?", 1)[0]
        gemini = GEMINI_PATH.match(path)
        if gemini and gemini["method"] == "countTokens":
            self._json(200, {"totalTokens": 100})
            return
        if path.endswith(RESPONSES_SUFFIX):
            provider, turn = "codex", responses_turn(body)
        elif path == ANTHROPIC_PATH:
            provider, turn = "claude", messages_turn(body)
        elif path.endswith(CHAT_SUFFIX):
            provider, turn = "opencode", chat_turn(body)
        elif gemini:
            provider, turn = "gemini", gemini_turn(body)
            body.setdefault("model", gemini["model"])
            body["stream"] = gemini["method"] == "streamGenerateContent"
        else:
            self._json(404, {"error": f"no such endpoint {self.path}"})
            return
        marker, attempt, reply = self.server.script.reply(provider, raw, turn)
        answers = not ({"error", "hang", "cut"} & set(reply))
        usage = USAGE[provider](reply, turn) if answers else None
        self.server.log.write({
            "at": time.time(), "provider": provider, "path": self.path, "marker": marker,
            "turn": turn, "attempt": attempt, "reply": reply, "body": body, "usage": usage,
            "session": self.headers.get("session-id")
            or self.headers.get("x-claude-code-session-id") or self.headers.get("x-session-id"),
            "headers": {k.lower(): v for k, v in self.headers.items()
                        if k.lower() in ("user-agent", "authorization", "x-api-key",
                                         "x-goog-api-key")},
        })
        self._answer(provider, body, reply, turn)

    do_GET = do_POST

    def _answer(self, provider: str, body: dict[str, Any], reply: dict[str, Any],
                turn: int) -> None:
        if "error" in reply:
            error = reply["error"]
            self._json(int(error["status"]), error.get("body", {}), error.get("headers", {}))
            return
        if reply.get("hang"):
            self._hang()
            return
        cut = "cut" in reply
        inner = reply["cut"] if cut else reply
        model = str(body.get("model") or provider)
        if provider == "codex":
            chunks = sse(responses_events(inner, turn))
        elif provider == "opencode":
            chunks = chat_chunks(inner, turn, model)
        elif provider == "gemini" and not body["stream"]:
            self._json(200, gemini_response(inner, turn, model))
            return
        elif provider == "gemini":
            chunks = [f"data: {json.dumps(gemini_response(inner, turn, model))}\n\n".encode()]
        else:
            content, stop = messages_content(inner, body)
            message = messages_message(body, content, stop, turn, inner)
            if not body.get("stream"):
                self._json(200, message)
                return
            chunks = sse(messages_events(message))
        self._stream(chunks[: len(chunks) // 2] if cut else chunks, cut=cut)

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, chunks: list[bytes], *, cut: bool) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk)
            self.wfile.flush()
        if cut:
            self.connection.shutdown(socket.SHUT_RDWR)  # the stream breaks mid-answer
        self.close_connection = True

    def _hang(self) -> None:
        """Send nothing until the client goes away (or the server stops)."""
        while not self.server.stopping.is_set():
            readable, _, _ = select.select([self.connection], [], [], 0.5)
            if readable and not self.connection.recv(65536, socket.MSG_PEEK):
                break
        self.close_connection = True


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], script: Script, log: Log) -> None:
        self.script, self.log = script, log
        self.stopping = threading.Event()
        super().__init__(address, Handler)


def loopback_up() -> None:
    """``ip link set lo up`` without iproute2: the namespace's first process does it."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH22x", b"lo", flags | iff_up))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready", type=Path, help="write the port here once listening")
    parser.add_argument("--loopback-up", action="store_true")
    options = parser.parse_args(argv)
    if options.loopback_up:
        loopback_up()
    server = Server(("127.0.0.1", options.port), Script(options.script), Log(options.log))
    if options.ready:
        temporary = options.ready.with_suffix(".tmp")
        temporary.write_text(str(server.server_address[1]))
        temporary.replace(options.ready)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.stopping.set()
    return 0


if __name__ == "__main__":
    sys.exit(main())
