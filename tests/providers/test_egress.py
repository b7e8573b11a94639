"""The egress proxy (providers/egress.py): real sockets, a real upstream on loopback."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from lane_runner.providers.egress import Destination, EgressProxy, admitted, parse_head


def _request_of(conn: socket.socket) -> bytes:
    """What a client sent: a head and its Content-Length, or what one read brings."""
    data = conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length and (chunk := conn.recv(65536)):
        data, body = data + chunk, body + chunk
    return data


@pytest.fixture
def upstream() -> Iterator[tuple[int, list[bytes]]]:
    """A loopback server that records what it got and answers like HTTP."""
    server = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            got.append(_request_of(conn))
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1], got
    server.close()


def _ask(path: Path, request: bytes) -> bytes:
    conn = socket.socket(socket.AF_UNIX)
    conn.connect(str(path))
    conn.sendall(request)
    said = b""
    while chunk := conn.recv(65536):
        said += chunk
    conn.close()
    return said


@pytest.fixture
def proxy(tmp_path: Path, upstream: tuple[int, list[bytes]]) -> Iterator[tuple[Path, list[str]]]:
    refused: list[str] = []
    allow = [Destination("127.0.0.1", upstream[0]), Destination("api.example.com")]
    running = EgressProxy(tmp_path / "egress.sock", allow, refused.append).start()
    yield running.path, refused
    running.close()


def test_a_tunnel_to_an_allowed_host_carries_bytes_both_ways(
    proxy: tuple[Path, list[str]], upstream: tuple[int, list[bytes]]
) -> None:
    """Catches: the 200 not sent before the relay, or one direction not relayed."""
    port, got = upstream
    said = _ask(proxy[0], f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nhello".encode())
    assert said.startswith(b"HTTP/1.1 200 Connection established\r\n\r\n")
    assert said.endswith(b"ok") and got == [b"hello"]


def test_a_host_or_port_off_the_list_is_refused_and_never_connected(
    proxy: tuple[Path, list[str]], upstream: tuple[int, list[bytes]]
) -> None:
    """Catches: the allow-list not checked, or checked by host alone (a loopback service
    on another port, the board's PostgreSQL, reachable through an allowed host)."""
    port, got = upstream
    for target in ("127.0.0.1:5432", f"localhost:{port}", "api.example.com:5432"):
        said = _ask(proxy[0], f"CONNECT {target} HTTP/1.1\r\n\r\n".encode())
        assert said.startswith(b"HTTP/1.1 403 "), target
    assert got == []
    assert proxy[1] == ["127.0.0.1:5432", f"localhost:{port}", "api.example.com:5432"]


def test_a_plain_request_reaches_the_host_in_origin_form_without_proxy_headers(
    proxy: tuple[Path, list[str]], upstream: tuple[int, list[bytes]]
) -> None:
    """Catches: the absolute URL or Proxy-Authorization passed on to the host."""
    port, got = upstream
    request = (f"POST http://127.0.0.1:{port}/v1/responses?x=1 HTTP/1.1\r\n"
               f"Host: 127.0.0.1:{port}\r\nProxy-Authorization: secret\r\n"
               "Content-Length: 2\r\n\r\n{}").encode()
    said = _ask(proxy[0], request)
    assert said.endswith(b"ok")
    [sent] = got
    assert sent.startswith(b"POST /v1/responses?x=1 HTTP/1.1\r\n")
    assert b"Proxy-Authorization" not in sent and sent.endswith(b"\r\n\r\n{}")


def test_anything_else_is_a_bad_request(proxy: tuple[Path, list[str]]) -> None:
    assert _ask(proxy[0], b"GET /local HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    assert parse_head(b"CONNECT nohost HTTP/1.1") is not None  # port 443 by default
    assert parse_head(b"GET ftp://x/ HTTP/1.1") is None


def test_destinations_parse_and_match() -> None:
    """Catches: a bare host admitting any port, or a name matched by prefix."""
    assert Destination.parse("API.openai.com") == Destination("api.openai.com")
    assert Destination.parse("127.0.0.1:8080") == Destination("127.0.0.1", 8080)
    assert Destination.of_url("http://127.0.0.1:9/v1") == Destination("127.0.0.1", 9)
    allow = [Destination("api.openai.com"), Destination("127.0.0.1", 9)]
    assert admitted(allow, "api.openai.com", 443)
    assert not admitted(allow, "api.openai.com", 5432)
    assert not admitted(allow, "api.openai.com.evil.test", 443)
    assert not admitted(allow, "127.0.0.1", 5432)
    for bad in ("", "host:0", "host:99999", "user@host", "host/path"):
        with pytest.raises(ValueError):
            Destination.parse(bad)
