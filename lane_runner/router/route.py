"""The route value and the pure rules of the router contract (docs/ARCHITECTURE.md §3.5).

A selection names ``worker/<provider>/<model>/<effort>``. The router's header
carries the stable choice; its message body may carry a more specific model
for the same provider and effort. Both rules live here, apart from any HTTP,
so they are tested as plain functions.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import asdict, dataclass, replace
from typing import Any

from lane_runner import display
from lane_runner.names import EFFORTS, MODEL_RULE, PROVIDERS, Lane, is_model_name
from lane_runner.providers import adapter
from lane_runner.router.errors import Cause, RoutingError

MAX_REASON_CHARS = display.MAX_REASON_CHARS
_WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Route:
    """Where one worker attempt goes, and why; recorded on the task and in the lane state."""

    provider: str
    model: str
    effort: str
    profile: str
    classifier: str
    reason: str
    latency_ms: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """One line for the task comment."""
        return (
            f"route: {self.provider}/{self.model} at {self.effort} effort "
            f"(classifier {self.classifier}, {self.latency_ms} ms): {bounded(self.reason)}"
        )


@dataclass(frozen=True)
class Selection:
    """A parsed ``worker/<provider>/<model>/<effort>`` choice."""

    provider: str
    model: str
    effort: str

    @property
    def target(self) -> str:
        return f"worker/{self.provider}/{self.model}/{self.effort}"


def parse_selection(value: str) -> Selection:
    """Parse a router selection; RoutingError quotes the router's words when it is bad.

    The model goes into a CLI's argv, so it must be a plain model name
    (``names.is_model_name``): a leading dash or a newline is refused, not passed on.
    """
    parts = value.strip().split("/")
    if len(parts) != 4 or parts[0] != "worker" or not all(parts):
        raise RoutingError(
            f"router selection {quoted(value)} is malformed: "
            "expected worker/<provider>/<model>/<effort>",
            Cause.BAD_SELECTION,
        )
    _, provider, model, effort = parts
    if provider not in PROVIDERS or effort not in EFFORTS:
        raise RoutingError(
            f"router selection {quoted(value)} is unsupported: provider must be one of "
            f"{', '.join(PROVIDERS)} and effort one of {', '.join(EFFORTS)}",
            Cause.BAD_SELECTION,
        )
    if not is_model_name(model):
        raise RoutingError(
            f"router selection {quoted(value)} names an unsafe model: expected {MODEL_RULE}",
            Cause.BAD_SELECTION,
        )
    return Selection(provider, model, effort)


def body_wins(header: Selection, body: Selection) -> bool:
    """The body's model wins only for the same provider and effort, and a model of that provider."""
    return (
        body.provider == header.provider
        and body.effort == header.effort
        and body.model.startswith(adapter(header.provider).model_prefix)
    )


def other_provider(provider: str, usable: Collection[str] = PROVIDERS) -> str:
    """The provider a failing or excluded one hands over to: the next one in the
    registry's order, round to the first, that is ``usable`` (its CLI is installed):
    a host with codex and claude alone hands claude's tasks to codex, not to a CLI it
    does not have. With none usable, the next one (its attempt then says why)."""
    start = PROVIDERS.index(provider)
    after = [PROVIDERS[(start + step) % len(PROVIDERS)] for step in range(1, len(PROVIDERS))]
    return next((name for name in after if name in usable), after[0])


def lane_assignee(provider: str, effort: str) -> str:
    """The manual-lane assignee for a provider and effort (the health guard routes through it)."""
    return f"cli-{provider}-{effort}"


@dataclass(frozen=True)
class RouteIds:
    """The route ids the router is asked for (``router_*_route`` in the configuration).

    Configurable so that a router set up for another runner works unchanged (the
    ancestor asked for ``atlas/worker/auto/maximum`` and
    ``atlas/worker/manual/{provider}/{effort}``). The defaults are the configuration's.
    """

    auto: str = "lane/worker/auto"
    manual: str = "lane/worker/manual/{provider}/{effort}"
    judge: str = "lane/judge"


def route_for(lane: Lane, ids: RouteIds = RouteIds()) -> str:  # noqa: B008 - frozen, shared
    """The router's route id for an assignee's lane."""
    if lane.automatic:
        return ids.auto
    return ids.manual.format(provider=lane.provider, effort=lane.effort)


def constraint(provider: str, reason: str) -> str:
    """The sentence appended to the task context when a provider must not be chosen."""
    return f"Routing constraint: the {provider} provider {reason}. Do not select it."


def rerouted(replacement: Route, *, classifier: str, why: str, latency_ms: int) -> Route:
    """``replacement`` marked as a detour (health guard, fallback); the detour's reason first."""
    return replace(
        replacement,
        classifier=classifier,
        reason=bounded(f"{why}; {replacement.reason}"),
        latency_ms=latency_ms,
    )


def quoted(text: str, limit: int = 200) -> str:
    """A router's words quoted for a message: control characters escaped, length bounded."""
    return bounded(repr(text), limit)


def bounded(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """One line of at most ``limit`` characters: a router may send a rationale of any size,
    and its control characters (a terminal escape, a NUL) are shown escaped, not sent on."""
    line = _WHITESPACE.sub(" ", text).strip()
    line = display.escaped(line)
    if len(line) <= limit:
        return line
    return f"{line[:limit]}… [{len(line) - limit} more characters]"
