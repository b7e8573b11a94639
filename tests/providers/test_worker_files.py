"""Files the runner makes in a worker's home (providers/worker_files.py), made by many
attempts at once: a daemon starts several attempts of one CLI as one worker together."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from lane_runner.providers import worker_files

ROUNDS = 25
STARTS = 8  # attempts settling one home at once


def _settle_together(paths: tuple[Path, ...]) -> list[BaseException]:
    """``STARTS`` settles of ``paths`` released at one instant; what each raised."""
    gate = threading.Barrier(STARTS)
    raised: list[BaseException] = []

    def start() -> None:
        gate.wait()
        try:
            worker_files.settle(paths, None)
        except OSError as error:
            raised.append(error)

    threads = [threading.Thread(target=start) for _ in range(STARTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return raised


def test_attempts_settling_one_home_at_once_all_start(tmp_path: Path) -> None:
    """Each start checks what is missing, then makes it: another start making the same
    path in between is not a failure (CI saw a claude fallback refused as misconfigured,
    "mkdir: cannot create directory 'hooks': File exists", four claudes starting at once)."""
    names = ("settings.json", "config.toml", "hooks", "commands", "agents", "plugins")
    for round_ in range(ROUNDS):
        home = tmp_path / f"home-{round_}" / ".claude"
        paths = tuple(home / name for name in names)
        assert _settle_together(paths) == []
        assert (home / "settings.json").read_text() == "{}\n"
        assert (home / "config.toml").read_bytes() == b""
        assert all((home / name).is_dir() for name in names[2:])


def test_a_settled_file_a_cli_already_wrote_is_left_as_it_is(tmp_path: Path) -> None:
    """A path made meanwhile is never truncated: a CLI may already be reading it."""
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"hooks": {}}\n')
    worker_files.settle((settings, tmp_path / ".claude" / "hooks"), None)
    assert settings.read_text() == '{"hooks": {}}\n'
    assert (tmp_path / ".claude" / "hooks").is_dir()


def test_a_path_that_cannot_be_made_is_an_error_naming_why(tmp_path: Path) -> None:
    blocker = tmp_path / "home"
    blocker.write_text("a file where the home's folder should be\n")
    with pytest.raises(OSError, match=r"cannot settle: mkdir: .*/home': Not a directory"):
        worker_files.settle((blocker / ".claude" / "hooks",), None)
