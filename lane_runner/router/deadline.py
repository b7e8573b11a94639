"""One deadline per routing call, and shutdown honoured in the middle of one.

The HTTP client's timeouts are per read: a router that trickles a byte every few
seconds never trips them and holds a worker slot (and the daemon's shutdown) for
as long as it likes. So every routing or judging call runs ``within`` one
deadline, and the router's client reads, writes and connects through
``DeadlineBackend``, which bounds each operation by what is left of the calling
thread's deadline and looks at the daemon's cancel event between short slices.
Nested calls (the health guard, a fallback) share the outer call's deadline.
"""

from __future__ import annotations

import threading
import time
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpcore
import httpx

#: The longest one blocking read waits before it looks at the deadline and the cancel event.
SLICE = 0.25

_local = threading.local()


class DeadlinePassed(Exception):
    """The routing call used up its deadline (``router_timeout``)."""


class Cancelled(Exception):
    """The daemon is shutting down: the routing call is abandoned."""


@dataclass(frozen=True)
class Deadline:
    seconds: float
    expires: float  # time.monotonic()
    cancel: threading.Event | None

    def remaining(self) -> float:
        """Seconds left; raises when the call must end now."""
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("the daemon is shutting down")
        left = self.expires - time.monotonic()
        if left <= 0:
            raise DeadlinePassed(f"the routing call took longer than {self.seconds:g} s")
        return left

    def bound(self, timeout: float | None) -> float:
        """``timeout`` cut to what is left, and to one slice when there is a cancel to watch."""
        left = self.remaining()
        if self.cancel is not None:
            left = min(left, SLICE)
        return left if timeout is None else min(timeout, left)

    def sleep(self, seconds: float) -> None:
        """A backoff pause that ends early, raising, at the deadline or on cancel."""
        until = time.monotonic() + seconds
        while (pause := min(until - time.monotonic(), self.bound(None))) > 0:
            if self.cancel is not None:
                self.cancel.wait(pause)
            else:
                time.sleep(pause)
        self.remaining()


def current() -> Deadline | None:
    """The deadline of the routing call running in this thread, if any."""
    return typing.cast(Deadline | None, getattr(_local, "deadline", None))


@contextmanager
def within(seconds: float, cancel: threading.Event | None) -> Iterator[Deadline]:
    """Run a routing call under one deadline; a call already under one keeps it."""
    outer = current()
    if outer is not None:
        yield outer
        return
    _local.deadline = Deadline(seconds, time.monotonic() + seconds, cancel)
    try:
        yield _local.deadline
    finally:
        _local.deadline = None


class DeadlineStream(httpcore.NetworkStream):
    """A connection whose every operation ends by the calling thread's deadline."""

    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        deadline = current()
        if deadline is None:
            return self._stream.read(max_bytes, timeout)
        started = time.monotonic()
        while True:
            try:
                return self._stream.read(max_bytes, deadline.bound(timeout))
            except httpcore.ReadTimeout:
                # One slice passed quietly; the client's own read timeout still decides,
                # unless the deadline or a shutdown ends the call first (bound raises).
                if timeout is not None and time.monotonic() - started >= timeout:
                    raise
                deadline.remaining()

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        deadline = current()
        bounded = timeout if deadline is None else min_timeout(timeout, deadline.remaining())
        self._stream.write(buffer, bounded)

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self,
        ssl_context: typing.Any,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        deadline = current()
        bounded = timeout if deadline is None else min_timeout(timeout, deadline.remaining())
        return DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, bounded))

    def get_extra_info(self, info: str) -> typing.Any:
        return self._stream.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """The synchronous socket backend with every stream made a ``DeadlineStream``."""

    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        deadline = current()
        bounded = timeout if deadline is None else min_timeout(timeout, deadline.remaining())
        stream = self._backend.connect_tcp(host, port, bounded, local_address, socket_options)
        return DeadlineStream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        deadline = current()
        bounded = timeout if deadline is None else min_timeout(timeout, deadline.remaining())
        return DeadlineStream(self._backend.connect_unix_socket(path, bounded, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


def min_timeout(timeout: float | None, left: float) -> float:
    return left if timeout is None else min(timeout, left)


def client(connections: int, timeout: httpx.Timeout) -> httpx.Client:
    """A pooled client whose connections honour the routing call's deadline.

    ``httpx.HTTPTransport`` takes no network backend, so its connection pool is
    replaced by one built the same way with ``DeadlineBackend``; the loopback
    trickle test (tests/router) fails if an httpx release stops using it.
    """
    limits = httpx.Limits(max_connections=connections + 1, max_keepalive_connections=connections)
    transport = httpx.HTTPTransport(limits=limits)
    transport._pool = httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=DeadlineBackend(),
    )
    return httpx.Client(
        transport=transport,
        timeout=timeout,
        headers={"user-agent": "lane-runner"},
        trust_env=False,
    )
