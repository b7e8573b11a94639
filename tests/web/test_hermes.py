"""The console over a Hermes Kanban home: Hermes's tasks as columns, a task's page and
its document, through the same board contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from lane_runner import config
from lane_runner.board import open_store
from lane_runner.home import Home
from lane_runner.web import auth
from lane_runner.web.app import build
from tests.web.conftest import TestClient

hermes_conftest = pytest.importorskip("tests.hermes.conftest", reason="the hermes extra")


def test_a_hermes_board_in_the_console(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hermes = hermes_conftest.make_home(tmp_path)
    task_id = hermes.create("a Hermes task <i>made by hermes</i>")
    monkeypatch.setenv("HERMES_KANBAN_HOME", str(hermes.path))
    root = tmp_path / "runner"
    Home(root).ensure()
    cfg = config.load(root, environ={"LANE_RUNNER_BOARD_URL": f"hermes://{hermes.path}"})
    store = open_store(cfg)
    try:
        with TestClient(build(cfg, store, auth.Gate(None, True))) as client:
            board = client.get("/")
            page = client.get(f"/boards/default/tasks/{task_id}")
            document = client.get(f"/api/v1/boards/default/tasks/{task_id}").json()
            state = client.get("/api/v1/state")
    finally:
        store.close()
    assert board.status_code == 200 and "a Hermes task &lt;i&gt;made by hermes" in board.text
    assert page.status_code == 200 and task_id in page.text
    assert document["id"] == task_id and document["title"].startswith("a Hermes task")
    assert state.status_code == 200 and "default" in state.json()["boards"]
