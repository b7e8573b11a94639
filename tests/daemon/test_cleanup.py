"""What finished tasks leave on disk goes; what blocked ones leave stays (issue 31).

The sweep runs in process on real parts (its ``now`` moved forward where retention
is the point), and once in a real daemon end to end.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from journal import RetentionPolicy
from lane_runner.board.model import Status
from lane_runner.cli import doctor
from lane_runner.cli.checks import Level
from lane_runner.providers.simulators.play import OUTPUT_FILE
from lane_runner.run import cleanup, keeping, workspace
from lane_runner.run.executor import RunExecutor
from lane_runner.service import diskuse
from lane_runner.service.services import Services
from lane_runner.usage import record
from tests.daemon.test_executor import claim, services  # noqa: F401 - the fixture
from tests.daemon.test_push import bare_remote, done_before_its_follow_ups
from tests.harness import BOARD, Lane, git

DAY = 86400.0
POLICY = RetentionPolicy(max_age_seconds=30 * DAY, max_count=1024, max_bytes=128 << 20)


def sweep(services: Services, later: float = 0.0) -> cleanup.SweepReport:  # noqa: F811
    return cleanup.sweep(services, POLICY, time.time() + later, lambda: False)


def has_ref(repository: Path, name: str) -> bool:
    return subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", name], cwd=repository, capture_output=True
    ).returncode == 0


def finish(services: Services, lane: Lane, title: str, body: str = "") -> str:  # noqa: F811
    task = lane.add(title, body=body)
    RunExecutor(services, claim(services, lane)).execute()
    return task.id


def test_a_done_tasks_worktree_goes_its_branch_stays_a_blocked_task_keeps_everything(
    services: Services, lane: Lane  # noqa: F811
) -> None:
    done = finish(services, lane, "done")
    blocked = finish(services, lane, "blocked", "[sim:blocked]")
    assert lane.board.get_task(blocked).status is Status.BLOCKED
    report = sweep(services)
    assert report.worktrees_removed == [f"{BOARD}/{done}"]
    assert not lane.home.worktree(BOARD, done).exists()
    assert not (lane.home.worktrees / BOARD / f".{done}.run").exists()  # its run marker too
    assert has_ref(lane.repo, f"refs/heads/{workspace.branch_name(BOARD, done)}")
    assert lane.home.worktree(BOARD, blocked).is_dir()
    lanes, logs = lane.home.lane_dir(BOARD), lane.home.logs / BOARD
    assert {p.name for p in lanes.glob("*.json")} >= {f"{done}.json", f"{blocked}.json"}
    assert (logs / f"{done}.log").exists()  # within retention_days

    later = sweep(services, later=31 * DAY)  # the lane state and logs follow the retention
    assert f"{done}.json" in {removal.name for removal in later.journal.removed}
    assert not (lanes / f"{done}.json").exists() and not (logs / f"{done}.log").exists()
    assert (lanes / f"{blocked}.json").exists() and (logs / f"{blocked}.log").exists()
    assert lane.home.worktree(BOARD, blocked).is_dir()


def test_a_worktree_holding_uncommitted_changes_is_kept_past_retention_and_named(
    services: Services, lane: Lane  # noqa: F811
) -> None:
    """Removing it would lose the change: it stays, however old, named by the sweep (so by
    ``cleanup --json``) and by doctor; once the change is committed on a branch, it goes."""
    done = finish(services, lane, "left something behind")
    worktree = lane.home.worktree(BOARD, done)
    (worktree / "scratch.txt").write_text("after the result\n")
    report = sweep(services)
    assert worktree.is_dir() and "uncommitted changes" in report.kept[f"{BOARD}/{done}"]
    assert report.held == [] and keeping.recorded(lane.home) == []  # within retention_days
    late = sweep(services, later=31 * DAY)
    assert late.worktrees_removed == [] and worktree.is_dir()
    why = "it holds uncommitted changes (1 path(s))"
    assert late.kept[f"{BOARD}/{done}"].startswith(f"{why}: removing it would lose them")
    assert keeping.recorded(lane.home) == [keeping.Kept(f"{BOARD}/{done}", str(worktree), why)]
    [warned] = [c for c in doctor.home_checks(services.cfg, lane.home)
                if c.name == "kept worktrees"]
    assert warned.level is Level.WARN and f"{BOARD}/{done} at {worktree}" in warned.detail

    git("add", "scratch.txt", cwd=worktree)
    git("commit", "-qm", "kept by hand", cwd=worktree)
    # Committed in the task's clone only, the commit would go with it (``run/taskgit.py``).
    assert sweep(services, later=31 * DAY).worktrees_removed == []
    git("push", "-q", "origin", f"HEAD:refs/heads/{workspace.branch_name(BOARD, done)}",
        cwd=worktree)
    assert sweep(services, later=31 * DAY).worktrees_removed == [f"{BOARD}/{done}"]
    assert keeping.recorded(lane.home) == []
    assert not [c for c in doctor.home_checks(services.cfg, lane.home)
                if c.name == "kept worktrees"]


def test_commits_only_a_detached_head_reaches_keep_their_worktree_past_retention(
    services: Services, lane: Lane  # noqa: F811
) -> None:
    """A hook or a person committed on a detached HEAD after the result: removing the
    worktree would leave that commit to git gc. It stays, and the commit with it."""
    done = finish(services, lane, "committed on a detached head")
    worktree = lane.home.worktree(BOARD, done)
    git("checkout", "-q", "--detach", cwd=worktree)
    git("commit", "-q", "--allow-empty", "-m", "only HEAD has me", cwd=worktree)
    orphan = subprocess.run(["git", "rev-parse", "HEAD"], cwd=worktree, capture_output=True,
                            text=True, check=True).stdout.strip()
    report = sweep(services, later=31 * DAY)
    assert report.worktrees_removed == [] and worktree.is_dir()
    assert report.kept[f"{BOARD}/{done}"].startswith(
        f"HEAD (detached at {orphan[:12]}) reaches 1 commit(s) no branch or other ref does"
    )
    assert has_ref(lane.repo, orphan)


def test_before_remove_runs_with_the_task_and_a_failure_is_only_commented(
    services: Services, lane: Lane  # noqa: F811
) -> None:
    log = lane.root / "before_remove.log"
    services.cfg = services.cfg.replace(hooks={"*": {
        "before_remove": f'echo "$LANE_HOOK $LANE_TASK_ID $LANE_COMMIT $PWD" >> {log}; exit 1'
    }})
    done = finish(services, lane, "hooked removal")
    worktree = lane.home.worktree(BOARD, done)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=worktree, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert sweep(services).worktrees_removed == [f"{BOARD}/{done}"]
    assert log.read_text().split() == ["before_remove", done, head, str(worktree)]
    said = [c.body for c in lane.board.comments(done)]
    assert "the before_remove hook failed with exit status 1" in said


class Stop(BaseException):
    """The runner stopping dead at one point."""


def test_follow_ups_a_result_missed_are_run_by_the_sweep_then_the_branch_may_go(
    services: Services, lane: Lane, monkeypatch: pytest.MonkeyPatch  # noqa: F811
) -> None:
    remote = bare_remote(lane)
    services.cfg = services.cfg.replace(push="on_done", delete_branches=True)
    task = lane.add("stopped before its push")
    done_before_its_follow_ups(services, lane, monkeypatch)
    assert lane.board.get_task(task.id).status is Status.DONE
    assert lane.lane_state(task.id)["delivery"]["stage"] == "journaled"  # type: ignore[index]
    branch = workspace.branch_name(BOARD, task.id)
    assert not has_ref(remote, f"refs/heads/{branch}")

    report = sweep(services)
    assert report.followed_up == [f"{BOARD}/{task.id}"]
    assert has_ref(remote, f"refs/heads/{branch}")
    assert any(c.body.startswith(f"pushed branch {branch}") for c in lane.board.comments(task.id))
    assert lane.lane_state(task.id)["delivery"]["stage"] == "followed"  # type: ignore[index]
    assert report.worktrees_removed == [f"{BOARD}/{task.id}"]
    assert report.branches_deleted == [f"{BOARD}/{task.id}: {branch}"]  # pushed: safe to go
    assert not has_ref(lane.repo, f"refs/heads/{branch}")


def test_an_unpushed_unmerged_branch_is_kept_even_with_delete_branches(
    services: Services, lane: Lane  # noqa: F811
) -> None:
    services.cfg = services.cfg.replace(delete_branches=True)
    done = finish(services, lane, "keep my branch")
    report = sweep(services)
    assert report.worktrees_removed == [f"{BOARD}/{done}"] and report.branches_deleted == []
    assert has_ref(lane.repo, f"refs/heads/{workspace.branch_name(BOARD, done)}")


def test_disk_use_by_category(services: Services, lane: Lane) -> None:  # noqa: F811
    finish(services, lane, "measured")
    use = diskuse.measure(lane.home)
    assert use["worktrees"].count == 1 and use["worktrees"].bytes > 0
    assert use["lane state"].count == 1 and use["journal"].count >= 1
    assert use["boards"].count >= 1 and use["logs"].count == 1
    assert use["quarantine"].count == 0
    line = diskuse.describe(use)
    assert "worktrees " in line and "(1 worktrees)" in line and "lane state " in line


def test_a_daemon_cleans_up_a_done_task_and_task_show_has_its_diff_stat(lane: Lane) -> None:
    lane.write_config(gc_interval=1.0)
    task = lane.add("end to end")
    daemon = lane.start()
    worktree = lane.home.worktree(BOARD, task.id)
    lane.wait(lambda: lane.board.get_task(task.id).status is Status.DONE, what="done")
    lane.wait(lambda: not worktree.exists(), what="the sweep to remove the worktree")
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0
    shown = lane.cli("task", "show", task.id, "--board", BOARD, "--json")
    assert shown.returncode == 0, shown.stderr
    delivered = orjson.loads(shown.stdout)["delivery"]
    assert OUTPUT_FILE in delivered["diffstat"] and len(delivered["commits"]) == 1
    text = lane.cli("task", "show", task.id, "--board", BOARD)
    assert f"delivery: branch {workspace.branch_name(BOARD, task.id)}, 1 commit(s)" in text.stdout
    assert "1 file changed" in text.stdout
    doctor = lane.cli("doctor", "--json")
    [use] = [c for c in orjson.loads(doctor.stdout)["checks"] if c["name"] == "disk use"]
    assert "(0 worktrees)" in use["detail"]


def test_a_batch_leaves_its_worktrees_and_cleanup_removes_them_without_a_daemon(
    lane: Lane,
) -> None:
    """``run --until-idle`` sweeps when it starts, before its tasks are done; ``lane-runner
    cleanup`` sweeps now, and refuses while a daemon holds the home."""
    done = lane.add("batch")
    blocked = lane.add("stuck", body="[sim:blocked]")
    batch = lane.cli("run", "--until-idle")
    assert batch.returncode == 4, batch.stderr  # one ended blocked
    assert lane.home.worktree(BOARD, done.id).is_dir()  # left by the batch
    swept = lane.cli("cleanup", "--json")
    assert swept.returncode == 0, swept.stderr
    assert orjson.loads(swept.stdout)["worktrees_removed"] == [f"{BOARD}/{done.id}"]
    assert not lane.home.worktree(BOARD, done.id).exists()
    assert lane.home.worktree(BOARD, blocked.id).is_dir()  # for whoever unblocks it
    assert lane.cli("cleanup").stdout.strip() == "nothing to clean up"

    lane.add("waits", body="[sim:hang]")
    daemon = lane.start()
    lane.wait(lambda: bool(lane.live_workers()), what="a daemon at work")
    refused = lane.cli("cleanup")
    assert refused.returncode == 1 and "holds" in refused.stderr, refused.stderr
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0


def test_the_sweep_shares_the_usage_ledger_and_drops_old_records_the_board_holds(
    services: Services, lane: Lane  # noqa: F811
) -> None:
    """The home's records older than ``usage_retention_days`` (90) leave it once the board
    holds them; the board's copy keeps them for every runner."""
    finish(services, lane, "spends")
    spent = [r.id for r in services.ledger.records(BOARD)]
    assert spent, "the simulated CLI reports its spend"
    assert sweep(services).usage_dropped == 0  # today's records stay
    assert sweep(services, later=100 * DAY).usage_dropped == len(spent)
    assert record.read(lane.home.usage_file(BOARD)) == []
    assert [r["id"] for r in lane.board.usage()] == spent
