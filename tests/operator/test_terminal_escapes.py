"""A worker's terminal escapes reach no terminal raw (issue 26, finding 7).

A model quotes a tool's colours or a hostile title sequence in its summary. The
daemon's text log and ``journal show`` are read at a terminal, where ``ESC ] 0 ;``
retitles the window, ``ESC [ 2 J`` clears it and a CR lets a fake line overwrite a
real one: both show them as ``\\xNN``. The board and ``--json`` keep the summary exact.
"""

from __future__ import annotations

import orjson

from tests.harness import Lane

ESC = "\x1b"
SHOWN = "done \\x1b]0;owned\\x07\\x1b[2J"


def test_the_text_log_and_journal_show_escape_a_workers_control_characters(lane: Lane) -> None:
    task = lane.add("colourful answer", body="[sim:escapes]", assignee="cli-codex-low")
    daemon = lane.cli("--log-format", "text", "run", "--until-idle")
    assert daemon.returncode == 0, daemon.stderr
    assert SHOWN in daemon.stderr
    assert ESC not in daemon.stderr and "\r" not in daemon.stderr
    summary = lane.board.get_task(task.id).summary
    assert summary is not None and ESC in summary  # the answer itself is kept exact
    human = lane.cli("journal", "show", "--task", task.id)
    assert human.returncode == 0, human.stderr
    assert f"summary:  {SHOWN}" in human.stdout
    assert ESC not in human.stdout and "\r" not in human.stdout
    shown = orjson.loads(lane.cli("journal", "show", "--task", task.id, "--json").stdout)
    records = [entry["record"] or {} for entry in shown["entries"]]
    assert summary in [record.get("summary") for record in records]
