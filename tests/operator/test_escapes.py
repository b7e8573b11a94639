"""Terminal escape sequences in titles and bodies are shown, never obeyed."""

from __future__ import annotations

import orjson

from lane_runner.board.model import NewTask
from tests.harness import BOARD, Lane

TITLE = "fix \x1b]0;pwned\x07 the title"
BODY = "clear \x1b[2J\x1b[H screen\rfake prompt\x9b31m"


def test_human_output_neutralises_escapes_and_json_keeps_them(lane: Lane) -> None:
    task = lane.board.add_task(NewTask(title=TITLE, body=BODY, id="t-esc"))
    for args in (("task", "ls", "--board", BOARD), ("task", "show", "--board", BOARD, task.id)):
        shown = lane.cli(*args)
        assert shown.returncode == 0, shown.stderr
        assert not any(c in shown.stdout for c in "\x1b\x07\r\x9b"), args
        assert "\\x1b]0;pwned\\x07" in shown.stdout
    exact = orjson.loads(lane.cli("task", "show", "--board", BOARD, task.id, "--json").stdout)
    assert exact["title"] == TITLE and exact["body"] == BODY
