"""Routing: which provider, model and effort each worker attempt uses
(docs/ARCHITECTURE.md §3.4, §3.5).

``make_router`` gives the HTTP model router when ``router_url`` is configured and
the embedded static policy otherwise; both speak the ``Router`` protocol.
"""

from __future__ import annotations

import threading

from lane_runner.config import Config
from lane_runner.names import PROVIDERS
from lane_runner.router.base import Router
from lane_runner.router.errors import Cause, RoutingError
from lane_runner.router.http import HttpRouter, http_client
from lane_runner.router.judge import Judge, RouterJudge, StructuralJudge, make_judge
from lane_runner.router.route import Route, RouteIds
from lane_runner.router.static import StaticPolicy
from lane_runner.router.verdict import Verdict

__all__ = [
    "Cause",
    "HttpRouter",
    "Judge",
    "Route",
    "RouteIds",
    "Router",
    "RouterJudge",
    "RoutingError",
    "StaticPolicy",
    "StructuralJudge",
    "Verdict",
    "make_judge",
    "make_router",
]


def make_router(
    cfg: Config, cancel: threading.Event | None = None, usable: tuple[str, ...] = PROVIDERS
) -> Router:
    """The HTTP router when ``router_url`` is set, else the embedded static policy.

    ``cancel`` is the daemon's shutdown event: setting it ends a routing call at once.
    ``usable``: the providers whose CLI is installed, the ones a fallback goes to.
    """
    if cfg.router_url:
        routes = RouteIds(cfg.router_auto_route, cfg.router_manual_route, cfg.router_judge_route)
        return HttpRouter(
            cfg.router_url, http_client(cfg), cfg.router_timeout, cancel=cancel, routes=routes,
            usable=usable,
        )
    return StaticPolicy(cfg, usable)
