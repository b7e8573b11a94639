"""sd_notify over a real datagram socket."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from lane_runner.cli.checks import Level
from lane_runner.service.notify import Notifier


@pytest.fixture
def listener(tmp_path: Path):
    path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(5)
    yield path, sock
    sock.close()


def test_ready_status_watchdog_and_stopping_reach_the_socket(listener) -> None:
    path, sock = listener
    notifier = Notifier(str(path))
    assert notifier.ready("0/4 slots busy")
    assert sock.recv(4096) == b"READY=1\nSTATUS=0/4 slots busy"
    assert notifier.watchdog()
    assert sock.recv(4096) == b"WATCHDOG=1"
    assert notifier.stopping("bye")
    assert sock.recv(4096) == b"STOPPING=1\nSTATUS=bye"


def test_outside_systemd_every_call_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    notifier = Notifier()
    assert not notifier.enabled and not notifier.ready("x")


def test_a_vanished_socket_is_reported_not_raised(tmp_path: Path) -> None:
    assert not Notifier(str(tmp_path / "gone.sock")).watchdog()


def test_watchdog_interval_is_half_the_usec_for_this_pid(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv("WATCHDOG_USEC", "20000000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    assert Notifier("").watchdog_interval == 10.0
    monkeypatch.setenv("WATCHDOG_PID", "1")
    assert Notifier("").watchdog_interval is None


def test_doctor_passes_a_socket_that_listens_and_fails_one_that_does_not(
    listener, tmp_path: Path
) -> None:
    from lane_runner.cli import doctor

    path, sock = listener
    (passed,) = doctor.notify_check(Notifier(str(path)))
    assert passed.level is Level.PASS
    assert sock.recv(4096) == b"STATUS=lane-runner doctor"
    (failed,) = doctor.notify_check(Notifier(str(tmp_path / "nobody.sock")))
    assert failed.level is Level.FAIL and "NotifyAccess" in failed.fix
    assert doctor.notify_check(Notifier("")) == []
