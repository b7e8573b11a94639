"""The HTTP model router client (docs/ARCHITECTURE.md §3.5).

One pooled ``httpx.Client`` per daemon carries every routing and judging
request, and each call runs under one deadline (``deadline.within``).
Connection errors, timeouts, 408, 429 and 5xx answers are retried a bounded
number of times with jittered backoff while the deadline allows (the router may
be restarting); any other 4xx is the router refusing the request, so asking
again cannot help. Whatever the HTTP client raises becomes a ``RoutingError``
with a cause: nothing from here may crash a worker.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass

import httpx
import orjson

from lane_runner import redact
from lane_runner.config import Config
from lane_runner.names import PROVIDERS, parse_lane
from lane_runner.router import deadline
from lane_runner.router.base import fallback_route
from lane_runner.router.errors import Cause, RoutingError
from lane_runner.router.route import (
    Route,
    RouteIds,
    Selection,
    body_wins,
    bounded,
    constraint,
    lane_assignee,
    other_provider,
    parse_selection,
    quoted,
    rerouted,
    route_for,
)
from lane_runner.router.verdict import Verdict, parse_verdict

log = logging.getLogger(__name__)

SELECTED_HEADER = "x-model-router-selected-model"
RATIONALE_HEADER = "x-model-router-rationale"
JUDGE_MAX_TOKENS = 256
CONNECT_TIMEOUT = 10.0
MAX_BODY_BYTES = 1 << 20
MAX_BACKOFF = 10.0
_EXCERPT = 500
#: Failures worth asking again within the same call: the router may be restarting.
_RETRIED = frozenset({Cause.UNREACHABLE, Cause.TIMEOUT, Cause.BUSY})
#: Pooled connections with ``concurrency = 0``: the most slots memory may give
#: (``service/sizing.py``, ``MAX_DERIVED``).
DERIVED_SLOTS = 16


def http_client(cfg: Config) -> httpx.Client:
    """The daemon's one pooled client for the router, a connection per slot; the daemon
    closes it (``router.close()``)."""
    return deadline.client(cfg.concurrency or DERIVED_SLOTS, _timeout(cfg.router_timeout))


def _timeout(seconds: float) -> httpx.Timeout:
    return httpx.Timeout(seconds, connect=min(seconds, CONNECT_TIMEOUT))


@dataclass(frozen=True)
class Answer:
    """The parts of a router response the contract reads."""

    selected: str | None
    rationale: str
    content: str | None


class HttpRouter:
    """Routes and judges through the model router at ``url``.

    ``timeout`` bounds one whole routing or judging call, retries included
    (``deadline.within``); ``cancel`` is the daemon's shutdown event, which ends a
    call at once. ``retries`` is how many times a failed exchange is tried again
    (so at most ``retries + 1`` requests) while time is left; ``backoff`` is the
    first delay in seconds, doubled per retry and jittered so restarted runners do
    not stampede the router.
    """

    def __init__(
        self,
        url: str,
        client: httpx.Client,
        timeout: float,
        retries: int = 3,
        backoff: float = 0.5,
        cancel: threading.Event | None = None,
        routes: RouteIds = RouteIds(),  # noqa: B008 - frozen, shared
        usable: tuple[str, ...] = PROVIDERS,
    ) -> None:
        self.usable = usable
        self.url = redact.url(url)  # what messages and logs show
        self._endpoint = url  # what is posted to: its credentials stay here
        self._client = client
        self._seconds = timeout
        self._timeout = _timeout(timeout)
        self._retries = retries
        self._backoff = backoff
        self._cancel = cancel
        self._routes = routes

    def route(
        self,
        context: str,
        assignee: str,
        exclude: str | None = None,
        exclude_reason: str | None = None,
    ) -> Route:
        with self._deadline():
            return self._route(context, assignee, exclude, exclude_reason)

    def _route(
        self, context: str, assignee: str, exclude: str | None, exclude_reason: str | None
    ) -> Route:
        started = time.monotonic()
        lane = parse_lane(assignee)
        route_id = route_for(lane, self._routes)
        message = context
        if exclude:
            message += "\n\n" + constraint(exclude, exclude_reason or "is excluded")
        answer = self._exchange(route_id, message, max_tokens=1)
        selection = self._selection(route_id, answer)
        classifier = "router" if lane.automatic else "router-manual"
        if exclude and selection.provider == exclude:
            return self._guard(context, selection, exclude, classifier, started)
        if not lane.automatic and (selection.provider, selection.effort) != (
            lane.provider,
            lane.effort,
        ):
            raise RoutingError(
                f"router answered manual route {route_id} with {selection.target}: "
                f"a manual lane is honoured as given; router said: {quoted(answer.rationale)}",
                Cause.WRONG_LANE,
            )
        return Route(
            provider=selection.provider,
            model=selection.model,
            effort=selection.effort,
            profile=f"{selection.provider}-{selection.effort}",
            classifier=classifier,
            reason=bounded(answer.rationale or f"router selected {selection.target}"),
            latency_ms=int((time.monotonic() - started) * 1000),
        )

    def fallback(self, context: str, failed: Route, reason: str) -> Route:
        with self._deadline():
            return fallback_route(self, context, failed, reason)

    def judge(self, context: str, answer: str) -> Verdict:
        """Ask the router (route ``router_judge_route``) whether ``answer`` completes the task."""
        message = (
            f"{context}\n\nWorker answer:\n{answer}\n\n"
            "Reply 'accept' if the answer completes the task, otherwise 'reject: <reason>'."
        )
        with self._deadline():
            reply = self._exchange(self._routes.judge, message, max_tokens=JUDGE_MAX_TOKENS)
        if reply.content is None:
            raise RoutingError(
                f"router judge answered without choices[0].message.content at {self.url}",
                Cause.BAD_RESPONSE,
            )
        return parse_verdict(reply.content)

    def close(self) -> None:
        self._client.close()

    @property
    def closed(self) -> bool:
        """Whether ``close`` ended its client: a reload closes the router it replaced
        once no run holds it (``Services.let_go``)."""
        return self._client.is_closed

    def _deadline(self) -> AbstractContextManager[deadline.Deadline]:
        return deadline.within(self._seconds, self._cancel)

    def _guard(
        self, context: str, selection: Selection, excluded: str, classifier: str, started: float
    ) -> Route:
        """The router picked the excluded provider anyway: keep its effort, change provider."""
        provider = other_provider(excluded, self.usable)
        replacement = self.route(context, lane_assignee(provider, selection.effort))
        return rerouted(
            replacement,
            classifier=f"{classifier}-health-guard",
            why=f"router selected excluded {excluded}; {provider} at its {selection.effort} effort",
            latency_ms=int((time.monotonic() - started) * 1000),
        )

    def _selection(self, route_id: str, answer: Answer) -> Selection:
        """The header's choice, refined by the body's more specific model when it qualifies."""
        if not answer.selected:
            raise RoutingError(
                f"router answered {route_id} without {SELECTED_HEADER}; "
                f"router said: {quoted(answer.rationale or answer.content or '', _EXCERPT)}",
                Cause.BAD_SELECTION,
            )
        try:
            selection = parse_selection(answer.selected)
        except RoutingError as error:
            raise RoutingError(
                f"{error}; router said: {quoted(answer.rationale, _EXCERPT)}", error.cause
            ) from None
        if not answer.content:
            return selection
        try:
            refined = parse_selection(answer.content)
        except RoutingError:
            log.debug(
                "router body %r is not a selection; header %s stands",
                bounded(answer.content, _EXCERPT),
                answer.selected,
            )
            return selection
        if body_wins(selection, refined):
            return refined
        log.info(
            "router body %s does not refine %s; header stands", refined.target, selection.target
        )
        return selection

    def _exchange(self, route_id: str, message: str, *, max_tokens: int) -> Answer:
        """Post one request, retrying what may pass; every failure is a RoutingError (a cause)."""
        payload = orjson.dumps(
            {
                "model": route_id,
                "messages": [{"role": "user", "content": message}],
                "max_tokens": max_tokens,
                "stream": False,
            }
        )
        failure: _Failure | None = None
        for attempt in range(self._retries + 1):
            try:
                if failure is not None:
                    self._pause(route_id, failure, attempt)
                return self._post(payload)
            except _Failure as error:
                failure = error
            except deadline.Cancelled as error:
                raise RoutingError(
                    f"router {self.url} {route_id}: {error}", Cause.CANCELLED
                ) from None
            except deadline.DeadlinePassed as error:
                last = f"; before that: {failure.problem}" if failure else ""
                raise RoutingError(
                    f"router {self.url} {route_id}: {error} (router_timeout){last}", Cause.TIMEOUT
                ) from None
            if failure.cause not in _RETRIED:
                raise RoutingError(
                    f"router {self.url} {route_id}: {failure.problem}", failure.cause
                )
        assert failure is not None
        raise RoutingError(
            f"router {self.url} failed {route_id} after {self._retries + 1} attempts: "
            f"{failure.problem}",
            failure.cause,
        )

    def _pause(self, route_id: str, failure: _Failure, retry: int) -> None:
        """The backoff before ``retry``, cut short (raising) by the deadline or a shutdown."""
        delay = self._delay(retry)
        log.warning(
            "router %s %s failed (%s); retry %d in %.2fs",
            self.url,
            route_id,
            failure.problem,
            retry,
            delay,
        )
        call = deadline.current()
        assert call is not None, "an exchange runs only within a routing call"
        call.sleep(delay)

    def _delay(self, retry: int) -> float:
        """Exponential from ``backoff``, capped, with jitter of ±50%."""
        return min(MAX_BACKOFF, self._backoff * 2.0 ** (retry - 1)) * random.uniform(0.5, 1.5)

    def _post(self, payload: bytes) -> Answer:
        """One request and the contract's parts of its answer; ``_Failure`` says what went wrong."""
        if self._client.is_closed:
            raise _Failure("the router client was closed by a configuration reload", Cause.CLOSED)
        try:
            status, answer, excerpt = self._request(payload)
        except httpx.HTTPError as error:
            raise _Failure(
                redact.text(f"{type(error).__name__}: {error}"), _cause_of(error)
            ) from error
        except httpx.InvalidURL as error:
            raise _Failure(redact.text(f"InvalidURL: {error}"), Cause.BAD_URL) from error
        except httpx.StreamError as error:  # a RuntimeError: the stream broke mid-read
            raise _Failure(f"{type(error).__name__}: {error}", Cause.BAD_RESPONSE) from error
        if 200 <= status < 300:
            return answer
        if status in (408, 429) or status >= 500:
            raise _Failure(f"HTTP {status}: {excerpt}", Cause.BUSY)
        raise _Failure(f"refused: HTTP {status}: {excerpt}", Cause.REFUSED)

    def _request(self, payload: bytes) -> tuple[int, Answer, str]:
        """One request: status, the contract's parts, and a short excerpt of the body for errors."""
        with self._client.stream(
            "POST",
            self._endpoint,
            content=payload,
            headers={"content-type": "application/json"},
            timeout=self._timeout,
        ) as response:
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_BODY_BYTES:
                    raise _Failure(f"answered more than {MAX_BODY_BYTES} bytes", Cause.BAD_RESPONSE)
            text = body.decode("utf-8", "replace")
            answer = Answer(
                selected=response.headers.get(SELECTED_HEADER),
                rationale=response.headers.get(RATIONALE_HEADER, ""),
                content=_content(bytes(body)),
            )
            return response.status_code, answer, bounded(text, _EXCERPT)


class _Failure(Exception):
    """One failed exchange, before ``_exchange`` decides whether to ask again."""

    def __init__(self, problem: str, cause: Cause) -> None:
        super().__init__(problem)
        self.problem = problem
        self.cause = cause


def _cause_of(error: httpx.HTTPError) -> Cause:
    """What an HTTP client error says about the router: gone for now, or misconfigured."""
    if isinstance(error, httpx.TimeoutException):
        return Cause.TIMEOUT
    if isinstance(error, httpx.UnsupportedProtocol | httpx.LocalProtocolError):
        return Cause.BAD_URL
    if isinstance(error, httpx.TransportError):  # connect, read, write, proxy, protocol break
        return Cause.UNREACHABLE
    return Cause.BAD_RESPONSE  # a bad Content-Encoding, a redirect loop


def _content(body: bytes) -> str | None:
    """``choices[0].message.content`` when the body is a chat completion, else None."""
    try:
        content = orjson.loads(body)["choices"][0]["message"]["content"]
    except (ValueError, LookupError, TypeError):
        # The body is optional in the contract: without a usable one the header stands.
        return None
    return content if isinstance(content, str) else None
