"""A judge's verdict on a worker answer, and the router judge's answer grammar."""

from __future__ import annotations

from dataclasses import dataclass

from lane_runner.router.errors import Cause, RoutingError
from lane_runner.router.route import bounded, quoted


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    reason: str


def parse_verdict(content: str) -> Verdict:
    """``accept`` or ``reject: <reason>``; anything else is a RoutingError quoting it."""
    text = content.strip()
    keyword, colon, reason = text.partition(":")
    if text.lower() == "accept":
        return Verdict(True, "the router judge accepted the answer")
    if keyword.strip().lower() == "reject" and colon and reason.strip():
        return Verdict(False, bounded(reason))
    raise RoutingError(
        f"router judge answered {quoted(content)}: expected 'accept' or 'reject: <reason>'",
        Cause.BAD_RESPONSE,
    )
