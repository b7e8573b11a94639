"""The embedded routing policy: used when no router URL is configured.

It needs nothing but configuration, so ``lane-runner run`` works with no
router at all: manual lanes get what they name, ``cli-auto`` gets the first
preferred provider at the default effort, and an excluded provider is skipped.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from lane_runner import config
from lane_runner.config import Config
from lane_runner.names import PROVIDERS, parse_lane
from lane_runner.router.base import fallback_route
from lane_runner.router.errors import Cause, RoutingError
from lane_runner.router.route import Route, other_provider

CLASSIFIER = "static"


class StaticPolicy:
    """Routes from ``<provider>_models``, ``provider_preference`` and ``default_effort``."""

    def __init__(self, cfg: Config, usable: tuple[str, ...] = PROVIDERS) -> None:
        self.usable = usable
        self._models: Mapping[str, Mapping[str, str]] = {
            provider: config.cli_models(cfg, provider) for provider in PROVIDERS
        }
        preferred = tuple(cfg.provider_preference)
        # Providers left out of the preference still serve when every preferred one is excluded.
        self._order = preferred + tuple(p for p in PROVIDERS if p not in preferred)
        self._default_effort: str = cfg.default_effort

    def route(
        self,
        context: str,
        assignee: str,
        exclude: str | None = None,
        exclude_reason: str | None = None,
    ) -> Route:
        started = time.monotonic()
        lane = parse_lane(assignee)
        effort = lane.effort or self._default_effort
        skipped = f"{exclude} {exclude_reason or 'is excluded'}"
        if lane.provider is None:
            provider = next(p for p in self._order if p != exclude)
            reason = f"static policy: {provider} is the first preferred provider at {effort} effort"
            if exclude == self._order[0]:
                reason = f"static policy: {skipped}; next preferred {provider} at {effort} effort"
        elif lane.provider == exclude:
            provider = other_provider(lane.provider, self.usable)
            reason = f"static policy: {assignee} names {skipped}; {provider} at the same effort"
        else:
            provider = lane.provider
            reason = f"static policy: manual lane {assignee}"
        return Route(
            provider=provider,
            model=self._model(provider, effort),
            effort=effort,
            profile=f"{provider}-{effort}",
            classifier=CLASSIFIER,
            reason=reason,
            latency_ms=int((time.monotonic() - started) * 1000),
        )

    def fallback(self, context: str, failed: Route, reason: str) -> Route:
        return fallback_route(self, context, failed, reason)

    def close(self) -> None:
        """Nothing to release: the policy holds no connections."""

    def _model(self, provider: str, effort: str) -> str:
        try:
            return self._models[provider][effort]
        except KeyError:
            raise RoutingError(
                f"static policy has no {provider} model for {effort} effort; "
                f"set {provider}_models.{effort} in config.toml",
                Cause.NO_MODEL,
            ) from None
