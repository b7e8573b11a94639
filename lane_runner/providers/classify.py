"""Failure classification from CLI-level signals only (docs/ARCHITECTURE.md §7).

Input is what the CLI itself said about the run: top-level error events, the
final result event, stderr and the exit status. The agent's own prose (agent
messages, tool output) never reaches this module, so a task *about*
authentication is not an auth failure. Everything here is pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from lane_runner.providers.model import Classification
from lane_runner.providers.reading import Signals
from lane_runner.providers.registry import ADAPTERS

__all__ = ["ORDER", "Signals", "classify_failure", "gave_up", "is_noise"]

#: Words either CLI (or an API behind it) uses, by what they mean; each adapter adds
#: what only its CLI says (``Provider.failure_texts``), and the two together decide.
_SHARED: dict[Classification, tuple[str, ...]] = {
    Classification.AUTH: (
        r"invalid api key|authentication[_ ]failed|\b401\b|\b403\b|unauthori[sz]ed|forbidden",
        r"token (?:has )?expired|expired (?:access |refresh |oauth )?token|refresh token",
    ),
    # Words the CLIs use when an account or a service has nothing left to give: a wait or
    # another provider helps, a retry of the same one does not (docs/ARCHITECTURE.md §7).
    Classification.CAPACITY: (
        r"usage limit|session limit|hit your [\w -]*limit|rate.?limit",
        r"\b429\b|\b529\b|too many requests|overloaded",
        r"\bquota\b|insufficient_quota|\bcredits?\b|credit balance|\bexhausted\b|\bcapacity\b",
    ),
    #: The model API refused the request itself: the same request would be refused again.
    Classification.REFUSED: (r"invalid_request_error",),
}
#: Checked in this order: session problems first (a different invocation recovers them,
#: and their texts match nothing else), then a refused invocation (nothing after it ran,
#: so any other word is incidental), auth before capacity ("401 ... rate limit window" is
#: still an auth problem), and a refusal of the request last ("invalid_request_error" is
#: also how some gateways word a quota).
ORDER = (
    Classification.SESSION_MISSING,
    Classification.SESSION_COLLISION,
    Classification.MISCONFIGURED,
    Classification.AUTH,
    Classification.CAPACITY,
    Classification.REFUSED,
)


def _pattern(fragments: Iterable[str]) -> re.Pattern[str]:
    """One pattern of ``fragments`` (none: a pattern that never matches)."""
    alternatives = [f"(?:{fragment})" for fragment in fragments] or ["(?!)"]
    return re.compile("|".join(alternatives), re.I | re.M)


def _texts(classification: Classification) -> list[str]:
    own = [text for cli in ADAPTERS.values() for text in cli.failure_texts.get(classification, ())]
    return [*_SHARED.get(classification, ()), *own]


_PATTERNS = [(_pattern(_texts(verdict)), verdict) for verdict in ORDER if _texts(verdict)]
#: Error events that say nothing about the outcome yet (codex's reconnect chatter).
NOISE = _pattern(text for cli in ADAPTERS.values() for text in cli.noise_texts)
#: A CLI's word that it has given up while it keeps running (codex, its reconnects
#: spent: offline, or no credentials it can use; it then waits for a network for ever).
GAVE_UP = _pattern(text for cli in ADAPTERS.values() for text in cli.gave_up_texts)


def is_noise(message: str) -> bool:
    """Reconnect chatter: an error event that says nothing about the outcome yet."""
    return bool(NOISE.match(message))


def gave_up(signals: Signals) -> tuple[Classification, str] | None:
    """The CLI's own word that the attempt is over while it keeps running, or None.

    codex, after its last reconnect, says it waits for the network: the attempt ends
    there as an authentication failure (the provider is marked unavailable and the task
    falls back), not after ``stall_timeout`` of waiting.
    """
    last = signals.errors[-1] if signals.errors else ""
    if not GAVE_UP.match(last):
        return None
    said = next((verdict for pattern, verdict in _PATTERNS if pattern.search(last)), None)
    if said is Classification.CAPACITY:
        # opencode, its quota spent, retries for ever: another provider can help now
        return said, f"the CLI's service has nothing left to give: {last[:300]}"
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
    """Classify an attempt that did not produce an acceptable result: the first of
    ``ORDER`` whose words (shared, or an adapter's) the CLI said."""
    said = _words_said([text for text in _evidence(signals) if text])
    if said is not None:
        return said
    if signals.signal is not None:
        return Classification.KILLED_BY_SIGNAL, f"killed by signal {signals.signal}"
    detail = next((text for text in reversed(signals.errors) if not is_noise(text)), "")
    detail = detail or error_line(signals.stderr)
    reason = f"exit status {signals.exit_status}" + (f": {detail[:500]}" if detail else "")
    return Classification.FAILED, reason


def _words_said(texts: list[str]) -> tuple[Classification, str] | None:
    """The first of ``ORDER`` whose words one of ``texts`` says, with the line that says
    them; None when none does."""
    for pattern, verdict in _PATTERNS:
        for text in texts:
            match = pattern.search(text)
            if match:
                return verdict, _line_around(text, match.start())
    return None


def _line_around(text: str, offset: int) -> str:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return text[start : end if end >= 0 else len(text)].strip()[:500]


#: A line that says what went wrong: a Rust panic, an ``Error:``/``error:`` line (Node,
#: clap, Python's ``ValueError: ...``), git's ``fatal:``. Notes and stack frames after it
#: (``note: run with RUST_BACKTRACE=1``, ``    at ...``) say nothing of the failure.
_ERROR_LINE = re.compile(r"panicked at|\b\w*Error\b:|^\s*(?:error|fatal)\b[^:\n]{0,40}:", re.I)


def error_line(text: str) -> str:
    """The CLI's own error line in ``text`` (stderr): the last line that names an error,
    with the message a panic prints on the line after it; else the last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for index in range(len(lines) - 1, -1, -1):
        line = lines[index]
        if _ERROR_LINE.search(line):
            after = lines[index + 1] if index + 1 < len(lines) else ""
            if "panicked at" in line and after and not after.startswith("note:"):
                line = f"{line} {after}"
            return line[:500]
    return lines[-1][:500] if lines else ""
