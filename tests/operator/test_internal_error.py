"""A bug ends in one line and exit 70, never a traceback quoting a secret."""

from __future__ import annotations

import argparse

import pytest

from lane_runner.cli import main as cli


def test_an_unexpected_exception_is_one_redacted_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A bug cannot be produced on purpose in real code: a handler that raises stands in.
    def broken(args: argparse.Namespace) -> int:
        raise RuntimeError("cannot reach http://ops:hunter2@router.internal/route")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: _with_handler(parser, broken))
    assert cli.main(["status"]) == cli.INTERNAL_ERROR
    err = capsys.readouterr().err
    assert "internal error: RuntimeError" in err and "http://ops:***@router.internal" in err
    assert "hunter2" not in err and "Traceback" not in err


def _with_handler(parser: argparse.ArgumentParser, handler: object) -> argparse.ArgumentParser:
    original = parser.parse_args

    def parse_args(argv: object = None) -> argparse.Namespace:
        args = original(argv)  # type: ignore[arg-type]
        args.handler = handler
        return args

    parser.parse_args = parse_args  # type: ignore[method-assign]
    return parser
