"""The only way out of a sandboxed attempt: an HTTP proxy the runner owns (docs/security.md).

An attempt under ``isolation = sandbox`` (``sandbox.py``) has a network namespace of its
own with nothing but loopback. Its CLI reaches the model API through this proxy: it
listens on a unix socket bound into the sandbox, where a forwarder on a loopback port
carries each connection to it, and the CLI finds it through ``HTTPS_PROXY`` and
``HTTP_PROXY`` (both CLIs honour them). The proxy connects, from the runner's own
network, only to the hosts of the allow-list (``egress_allow``: the model APIs and the
configured gateways), so the board's PostgreSQL, a PgBouncer or the metrics port on
the runner's loopback stay out of reach.

It speaks ``CONNECT host:port`` (a TLS tunnel, what an ``https://`` API gets) and a
plain request in absolute form (``POST http://host:port/path``, what an ``http://``
gateway gets), each connection one request or one tunnel. A host is matched by name,
as the client asked for it: an allowed name is resolved here, never by the agent.
One thread accepts, and each connection gets two threads (one per direction): an
attempt opens a handful.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

log = logging.getLogger(__name__)

#: The longest request head the proxy reads before it answers 400.
HEAD_LIMIT = 16 * 1024
#: How long connecting to an allowed host may take.
CONNECT_TIMEOUT = 30.0
CHUNK = 64 * 1024
#: Request headers meant for the proxy, not passed to the host.
_HOP_HEADERS = frozenset({b"proxy-connection", b"proxy-authorization", b"connection",
                          b"keep-alive"})


@dataclass(frozen=True)
class Destination:
    """One entry of the allow-list: a host, and its port (None: 443 and 80)."""

    host: str
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> Destination:
        """``host``, ``host:port`` or ``[v6]:port``; ValueError naming what is wrong."""
        parts = urlsplit(f"//{text.strip()}")
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"{text!r}: the port is not a number from 1 to 65535") from None
        host = (parts.hostname or "").lower()
        if not host or parts.path or parts.username or parts.password or port == 0:
            raise ValueError(f"{text!r}: expected a host or host:port")
        return cls(host, port)

    @classmethod
    def of_url(cls, url: str) -> Destination | None:
        """Where an ``http(s)://`` URL points, its scheme's port filled in."""
        parts = urlsplit(url)
        if not parts.hostname or parts.scheme not in ("http", "https"):
            return None
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return None
        return cls(parts.hostname.lower(), port)

    def admits(self, host: str, port: int) -> bool:
        if host.lower().strip("[]") != self.host:
            return False
        return port in (443, 80) if self.port is None else port == self.port

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


def admitted(allow: Iterable[Destination], host: str, port: int) -> bool:
    """Whether ``host:port`` is on the allow-list (pure)."""
    return any(entry.admits(host, port) for entry in allow)


@dataclass(frozen=True)
class Request:
    """A request head as the proxy reads it: where to, and what to send the host."""

    host: str
    port: int
    tunnel: bool
    """CONNECT: after the 200, bytes flow both ways untouched."""
    head: bytes
    """For a plain request, the head to send the host (origin form, hop headers gone)."""


def parse_head(head: bytes) -> Request | None:
    """A request head (up to and without its blank line) as a ``Request``; None when it
    is neither a CONNECT nor an absolute-form ``http://`` request (pure)."""
    lines = head.split(b"\r\n")
    words = lines[0].split(b" ")
    if len(words) != 3 or not words[2].startswith(b"HTTP/1."):
        return None
    method, target, version = words
    if method == b"CONNECT":
        found = Destination.of_url(f"https://{target.decode('latin-1')}")
        if found is None or found.port is None:
            return None
        return Request(found.host, found.port, True, b"")
    url = target.decode("latin-1")
    found = Destination.of_url(url)
    if found is None or found.port is None or not url.startswith("http://"):
        return None
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    kept = [line for line in lines[1:] if line.split(b":", 1)[0].strip().lower()
            not in _HOP_HEADERS]
    first = b" ".join([method, path.encode("latin-1"), version])
    return Request(found.host, found.port, False,
                   b"\r\n".join([first, *kept, b"Connection: close", b"", b""]))


def _answer(conn: socket.socket, status: str, text: str = "") -> None:
    body = text.encode()
    with contextlib.suppress(OSError):  # the client is gone: nothing to tell
        conn.sendall(f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\n"
                     "Connection: close\r\n\r\n".encode() + body)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy ``source`` to ``sink`` until it ends, then end ``sink``'s writing side."""
    try:
        while data := source.recv(CHUNK):
            sink.sendall(data)
    except OSError as error:
        log.debug("egress relay ended: %s", error)  # either side closed: the relay is over
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


class EgressProxy:
    """The proxy of one attempt, on ``socket_path``, letting ``allow`` through."""

    def __init__(
        self,
        socket_path: Path,
        allow: Iterable[Destination],
        on_refused: Callable[[str], None] | None = None,
    ) -> None:
        self.path = socket_path
        self.allow = tuple(allow)
        self._on_refused = on_refused or (lambda _what: None)
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(socket_path))
        self._server.listen(64)
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="egress", daemon=True)

    def start(self, owner: tuple[int, int] | None = None) -> EgressProxy:
        """Serve; ``owner`` (uid, gid) is who may connect (the socket is theirs, 0600)."""
        if owner is not None:
            os.chown(self.path, *owner)
        os.chmod(self.path, 0o600)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop accepting and end every open connection."""
        with self._lock:
            self._closed = True
            held = list(self._open)
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        for conn in held:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._thread.join(timeout=5)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._handle, args=(conn,), name="egress-conn",
                             daemon=True).start()

    def _hold(self, conn: socket.socket) -> bool:
        with self._lock:
            if self._closed:
                return False
            self._open.add(conn)
            return True

    def _handle(self, conn: socket.socket) -> None:
        upstream: socket.socket | None = None
        if not self._hold(conn):
            conn.close()
            return
        try:
            head, rest = _read_head(conn)
            request = parse_head(head) if head is not None else None
            if request is None:
                _answer(conn, "400 Bad Request", "lane-runner egress: CONNECT or http:// only\n")
                return
            if not admitted(self.allow, request.host, request.port):
                self._on_refused(f"{request.host}:{request.port}")
                _answer(conn, "403 Forbidden", f"lane-runner egress: {request.host}:"
                        f"{request.port} is not in egress_allow\n")
                return
            try:
                upstream = socket.create_connection((request.host, request.port),
                                                    timeout=CONNECT_TIMEOUT)
            except OSError as error:
                _answer(conn, "502 Bad Gateway", f"lane-runner egress: {error}\n")
                return
            upstream.settimeout(None)
            self._hold(upstream)
            if request.tunnel:
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if request.head or rest:
                upstream.sendall(request.head + rest)
            back = threading.Thread(target=_pump, args=(upstream, conn), daemon=True)
            back.start()
            _pump(conn, upstream)
            back.join()
        except OSError as error:
            log.debug("egress connection ended: %s", error)  # a client or host went away
        finally:
            with self._lock:
                self._open.discard(conn)
                if upstream is not None:
                    self._open.discard(upstream)
            conn.close()
            if upstream is not None:
                upstream.close()


def _read_head(conn: socket.socket) -> tuple[bytes | None, bytes]:
    """The request head up to its blank line, and whatever came after it; None for the
    head when the client ended first or sent more than ``HEAD_LIMIT``."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > HEAD_LIMIT:
            return None, b""
        chunk = conn.recv(4096)
        if not chunk:
            return None, b""
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest
