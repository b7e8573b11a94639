"""A bug ends in one line and exit 70, never a traceback quoting a secret."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import pytest

from lane_runner.cli import main as cli


def test_an_unexpected_exception_is_one_redacted_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A bug cannot be produced on purpose in real code: a handler that raises stands in.
    def broken(args: argparse.Namespace) -> int:
        raise RuntimeError("cannot reach http://ops:hunter2@router.internal/route")

    parse = cli.parse

    def with_broken_handler(
        parser: argparse.ArgumentParser, argv: Sequence[str] | None
    ) -> argparse.Namespace:
        args = parse(parser, argv)
        args.handler = broken
        return args

    monkeypatch.setattr(cli, "parse", with_broken_handler)
    assert cli.main(["status"]) == cli.INTERNAL_ERROR
    err = capsys.readouterr().err
    assert "internal error: RuntimeError" in err and "http://ops:***@router.internal" in err
    assert "hunter2" not in err and "Traceback" not in err
