"""The repository's ``.lane-runner/workflow.md``, read from the task's base commit
(``run/workflow.py``, docs/verification.md)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson

from lane_runner import config
from lane_runner.board.model import Status
from lane_runner.run import workflow
from tests.harness import BOARD, Lane, git

FILE = """+++
checks = ["test -f sim-checked.txt || { echo 'SIM-FIX: sim-checked.txt'; exit 1; }"]
review = "claude"
check_turns = 2
model = {codex = "gpt-from-workflow"}
+++
Task {id} on {board} ({title}): keep {braces} as they are.
"""
#: A body a simulated worker in ``feedback`` acts on: it makes the file the line names.
ACTED_ON = FILE.replace("keep {braces} as they are.", "SIM-FIX: wf-{id}.txt")


def test_front_matter_and_body_are_read_and_checked() -> None:
    found = workflow.parse(FILE)
    assert found.problem is None
    assert found.settings == {"checks": [found.settings["checks"][0]], "review": "claude",
                              "check_turns": 2, "model": {"codex": "gpt-from-workflow"}}
    assert "model: expected a table" in (workflow.parse('+++\nmodel = "x"\n+++\n').problem or "")
    fields = {"id": "t-1", "board": "b", "title": "T", "branch": "lane/b/t-1"}
    assert workflow.instructions(found, fields) == "Task t-1 on b (T): keep {braces} as they are."
    assert workflow.parse("no front matter").instructions == "no front matter"
    assert "not one of" in (workflow.parse("+++\ngoal = 1\n+++\n").problem or "")
    assert "expected one of" in (workflow.parse('+++\nreview = "x"\n+++\n').problem or "")
    assert "no closing" in (workflow.parse("+++\nreview = 'auto'\n").problem or "")


def test_the_boards_settings_win_over_the_workflows(tmp_path: Path) -> None:
    found = workflow.parse(FILE)
    plain = workflow.resolve(config.load(tmp_path), BOARD, found)
    assert plain.policy.review == "claude" and plain.policy.check_turns == 2
    assert plain.sources["review"].startswith("workflow")
    assert plain.sources["review_rounds"] == "config (default)"
    cfg = config.load(tmp_path).replace(review="off")
    board = workflow.resolve(cfg, BOARD, found)
    assert board.policy.review == "off" and board.sources["review"] == "config (override)"
    task = workflow.resolve(cfg, BOARD, found, {"review": "codex", "checks": None})
    assert task.policy.review == "codex" and task.sources["review"] == "task"
    assert task.sources["checks"].startswith("workflow")


def commit_workflow(repo: Path, text: str) -> str:
    (repo / ".lane-runner").mkdir(exist_ok=True)
    (repo / ".lane-runner" / "workflow.md").write_text(text)
    git("add", ".", cwd=repo)
    git("commit", "-qm", "workflow", cwd=repo)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True,
                          text=True, check=True).stdout.strip()


def test_the_workflow_is_read_from_the_base_never_the_worktree(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    base = commit_workflow(repo, FILE)
    (repo / ".lane-runner" / "workflow.md").write_text('+++\nreview = "off"\n+++\nmine\n')
    found = workflow.read(repo, base, None)
    assert found.settings["review"] == "claude" and "keep {braces}" in found.instructions
    assert workflow.read(repo, None, None) == workflow.Workflow()


def test_a_task_runs_by_its_repositorys_workflow(lane: Lane) -> None:
    commit_workflow(lane.repo, ACTED_ON)
    task = lane.add("by the repository's rules", "[sim:feedback]", assignee="cli-codex-medium")
    assert lane.start("--until-idle").wait(timeout=120) == 0
    assert lane.board.get_task(task.id).status is Status.DONE
    roles = [a["role"] for a in lane.lane_state(task.id)["attempts"]]  # type: ignore[union-attr]
    assert roles == ["implement", "implement", "review", "implement", "review"]
    said = lane.cli("evidence", task.id, "--json")
    assert f"wf-{task.id}.txt" in orjson.loads(said.stdout)["diff"]["stat"]  # it was told
    models = {a["model"] for a in lane.lane_state(task.id)["attempts"]  # type: ignore[union-attr]
              if a["role"] == "implement"}
    assert models == {"gpt-from-workflow"}


def test_the_dry_run_shows_the_checks_the_reviewer_and_the_prompts(lane: Lane) -> None:
    commit_workflow(lane.repo, FILE)
    lane.write_config(review_rounds=1)
    task = lane.add("previewed", assignee="cli-codex-medium")
    said = lane.cli("run", "--dry-run", "--json")
    assert said.returncode == 0, said.stderr
    [found] = orjson.loads(said.stdout)
    shown = found["verification"]
    assert shown["review"] == "claude" and shown["sources"]["review"].startswith("workflow")
    assert shown["review_rounds"] == 1 and "config.toml" in shown["sources"]["review_rounds"]
    assert shown["reviewer"]["provider"] == "claude"
    assert found["route"]["model"] == "gpt-from-workflow"  # the static policy's, replaced
    assert f"Task {task.id} on {BOARD} (previewed)" in found["prompt"]
    # a resumed turn is told what is new, not the task again (caught: no resumed prompt shown)
    assert found["resumed_prompt"].startswith("## Continue\n<the check's output")
    assert "previewed" not in found["resumed_prompt"]
    assert "review schema" in shown["review_prompt"] and "previewed" in shown["review_prompt"]
    text = lane.cli("run", "--dry-run").stdout
    assert "reviewer" in text and "review prompt:" in text and "[workflow (" in text
    assert "resumed turn prompt:" in text
