"""Failure classification from CLI-level signals only (docs/ARCHITECTURE.md §7).

Input is what the CLI itself said about the run: top-level error events, the
final result event, stderr and the exit status. The agent's own prose (agent
messages, tool output) never reaches this module, so a task *about*
authentication is not an auth failure. Everything here is pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from lane_runner.providers.model import Classification

_SESSION_MISSING = re.compile(
    r"no rollout found for thread id|no conversation found with session id", re.I
)
_SESSION_COLLISION = re.compile(r"session id (?:\S+ )?(?:is )?already in use", re.I)
_AUTH = re.compile(
    r"not logged in|please run /login|invalid api key|authentication[_ ]failed"
    r"|\b401\b|\b403\b|unauthori[sz]ed|forbidden"
    r"|token (?:has )?expired|expired (?:access |refresh |oauth )?token|refresh token",
    re.I,
)
# Words the CLIs use when an account or a service has nothing left to give: a wait or
# another provider helps, a retry of the same one does not (docs/ARCHITECTURE.md §7).
_CAPACITY = re.compile(
    r"usage limit|session limit|hit your [\w -]*limit|rate.?limit|\b429\b|\b529\b"
    r"|too many requests|overloaded"
    r"|\bquota\b|insufficient_quota|\bcredits?\b|credit balance|\bexhausted\b|\bcapacity\b"
    # the API failing after the CLI's own retries: codex's 5xx, claude's 5xx
    r"|experiencing high demand|server-side issue",
    re.I,
)
#: The model API refused the request itself: the task does not fit the model's context
#: window, or the request is invalid. The same request would be refused again, by any
#: retry, so a person must look (docs/ARCHITECTURE.md §7).
_REFUSED = re.compile(
    r"context window|context_length_exceeded|prompt is too long|invalid_request_error"
    r"|api error: 400\b|unexpected status 400\b",
    re.I,
)
#: The CLI refused the runner's own invocation: clap's (codex) and commander's (claude)
#: usage errors, a schema either CLI or the API will not take, a missing settings file,
#: claude's root refusal; or the model gateway it was pointed at does not work: a model
#: provider, a variable or a model that is not there, an endpoint that does not exist.
#: Warnings (claude's "strict mode: ...") are not refusals.
_MISCONFIGURED = re.compile(
    r"^error: (?:unexpected argument|unknown option|too many arguments"
    r"|option '[^']*' argument missing|a value is required for|invalid value)"
    r"|--json-schema is not (?:a )?valid JSON|invalid schema for response_format"
    r"|settings file not found|invalid session id\. must be a valid uuid"
    r"|cannot be used with root/sudo privileges"
    # the model gateway the operator configured: codex_config / <provider>_env
    r"|model provider `[^`]*` not found|missing environment variable|error loading config\.toml"
    r"|model `[^`]*` does not exist|issue with the selected model|unexpected status 404\b",
    re.I | re.M,
)
RECONNECTING = re.compile(r"^\s*reconnecting\b", re.I)
#: codex's word once its reconnects are spent (offline, or no credentials it can use):
#: it then waits for a network for ever, and nothing it does after is progress.
RECONNECTS_SPENT = re.compile(r"^\s*reconnecting\.\.\. waiting for network", re.I)


@dataclass
class Signals:
    """CLI-level evidence gathered while an attempt streamed."""

    errors: list[str] = field(default_factory=list)
    """Top-level error texts: codex ``error``/``turn.failed``, claude ``is_error`` results."""
    result_is_error: bool = False
    stderr: str = ""
    exit_status: int | None = None
    signal: int | None = None

    def add_error(self, text: str, keep: int = 20) -> None:
        self.errors.append(text[:2000])
        del self.errors[:-keep]


def is_noise(message: str) -> bool:
    """Reconnect chatter: an error event that says nothing about the outcome yet."""
    return bool(RECONNECTING.match(message))


def gave_up(signals: Signals) -> tuple[Classification, str] | None:
    """The CLI's own word that the attempt is over while it keeps running, or None.

    codex, after its last reconnect, says it waits for the network: the attempt ends
    there as an authentication failure (the provider is marked unavailable and the task
    falls back), not after ``stall_timeout`` of waiting.
    """
    last = signals.errors[-1] if signals.errors else ""
    if not RECONNECTS_SPENT.match(last):
        return None
    return Classification.AUTH, (
        "the CLI could not reach its service after its reconnects (offline, a proxy, or "
        f"not logged in: see 'lane-runner doctor'): {last[:300]}"
    )


def _evidence(signals: Signals) -> Iterable[str]:
    """Latest decisive error first (the CLI's final word), then stderr, then noise."""
    decisive = [text for text in reversed(signals.errors) if not is_noise(text)]
    yield from decisive
    yield signals.stderr
    if not decisive:
        yield from signals.errors


def classify_failure(signals: Signals) -> tuple[Classification, str]:
    """Classify an attempt that did not produce an acceptable result.

    Session problems are checked first: they are recoverable by a different
    invocation and their texts would otherwise not match anything else. Then a
    refused invocation: nothing after it ran, so any other word is incidental.
    Auth before capacity: "401 ... rate limit window" is still an auth problem. A
    refusal of the request comes last: "invalid_request_error" is also how some
    gateways word a quota.
    """
    texts = [text for text in _evidence(signals) if text]
    for pattern, verdict in (
        (_SESSION_MISSING, Classification.SESSION_MISSING),
        (_SESSION_COLLISION, Classification.SESSION_COLLISION),
        (_MISCONFIGURED, Classification.MISCONFIGURED),
        (_AUTH, Classification.AUTH),
        (_CAPACITY, Classification.CAPACITY),
        (_REFUSED, Classification.REFUSED),
    ):
        for text in texts:
            match = pattern.search(text)
            if match:
                return verdict, _line_around(text, match.start())
    if signals.signal is not None:
        return Classification.KILLED_BY_SIGNAL, f"killed by signal {signals.signal}"
    detail = next((text for text in reversed(signals.errors) if not is_noise(text)), "")
    detail = detail or _last_line(signals.stderr)
    reason = f"exit status {signals.exit_status}" + (f": {detail[:500]}" if detail else "")
    return Classification.FAILED, reason


def _line_around(text: str, offset: int) -> str:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return text[start : end if end >= 0 else len(text)].strip()[:500]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:500] if lines else ""
