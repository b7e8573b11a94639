"""A home is one runner: a copy of it, or a board file linked into two homes, is refused
(issue 26, finding 6), and recovery ends only its own home's processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from lane_runner.board.model import Status
from lane_runner.home import Home
from lane_runner.service import identity, leftovers
from tests.harness import BOARD, Lane


def test_a_home_is_bound_on_first_use_and_stays_itself(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    node = identity.node_id(home)
    assert identity.node_id(home) == node == home.node_id()
    assert home.node_binding_file.stat().st_mode & 0o777 == 0o600


def test_a_home_that_predates_the_binding_is_bound_quietly(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    node = home.node_id()  # made by an earlier lane-runner: no binding yet
    assert not home.node_binding_file.exists()
    assert identity.node_id(home) == node
    assert home.node_binding_file.exists()


def test_a_copied_home_is_refused_until_it_is_given_a_node_of_its_own(tmp_path: Path) -> None:
    original = Home(tmp_path / "original")
    node = identity.node_id(original)
    copy = Home(tmp_path / "copy")
    shutil.copytree(original.root, copy.root)
    with pytest.raises(identity.HomeCopied, match="recover --adopt.*recover --new-node"):
        identity.node_id(copy)
    renewed = identity.renew(copy)
    assert renewed != node and identity.node_id(copy) == renewed
    assert identity.node_id(original) == node


def test_a_moved_home_is_refused_until_it_is_adopted(tmp_path: Path) -> None:
    before = Home(tmp_path / "before")
    node = identity.node_id(before)
    after = Home(tmp_path / "after")
    before.root.rename(after.root)  # the same directory (inode), another path
    with pytest.raises(identity.HomeCopied, match=str(tmp_path / "before")):
        identity.node_id(after)
    assert identity.adopt(after) == node and identity.node_id(after) == node


def test_a_node_id_brought_in_from_another_home_is_refused(tmp_path: Path) -> None:
    home, other = Home(tmp_path / "home"), Home(tmp_path / "other")
    identity.node_id(home)
    identity.node_id(other)
    shutil.copyfile(other.node_file, home.node_file)
    with pytest.raises(identity.HomeCopied, match="another node id"):
        identity.node_id(home)


def environ_of(**variables: str) -> bytes:
    return b"\0".join(f"{k}={v}".encode() for k, v in {"PATH": "/bin", **variables}.items())


def test_a_worker_is_this_homes_only_when_it_carries_this_home(tmp_path: Path) -> None:
    here, there = tmp_path / "here", tmp_path / "there"
    node, home_mark = leftovers.NODE_VARIABLE, leftovers.HOME_VARIABLE
    assert leftovers.carries(environ_of(**leftovers.markers("n1", here)), "n1", here)
    assert not leftovers.carries(environ_of(**leftovers.markers("n1", there)), "n1", here)
    assert not leftovers.carries(environ_of(**leftovers.markers("n2", here)), "n1", here)
    assert leftovers.carries(environ_of(**{node: "n1"}), "n1", here)  # an older runner's
    assert leftovers.carries(environ_of(**{node: "n1", home_mark: str(there)}), "n1", None)


def test_a_copied_homes_recover_refuses_and_never_ends_the_originals_clis(
    lane: Lane, tmp_path: Path
) -> None:
    """The issue's case: a restored snapshot of a live home. Its recover used to take the
    home for its own and kill the original's running CLIs."""
    lane.add("runs on", body="[sim:hang]")
    daemon = lane.start()
    lane.wait(lambda: bool(lane.live_workers()), what="the original's CLI")
    workers = lane.live_workers()
    copy = tmp_path / "copy"
    shutil.copytree(lane.root, copy, symlinks=True)

    def in_copy(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lane_runner.cli.main", "--home", str(copy), *args],
            env=lane.environ(), capture_output=True, text=True, timeout=120, cwd=copy,
        )

    doctor = in_copy("doctor", "--json")
    checks = {check["name"]: check for check in json.loads(doctor.stdout)["checks"]}
    assert doctor.returncode == 1 and checks["home identity"]["level"] == "fail"
    assert "recover --adopt" in checks["home identity"]["detail"]
    original = json.loads(lane.cli("doctor", "--json").stdout)["checks"]
    assert {"name": "home identity", "level": "pass"}.items() <= next(
        check for check in original if check["name"] == "home identity"
    ).items()
    for command in (("recover",), ("run", "--until-idle")):
        refused = in_copy(*command)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "recover --adopt" in refused.stderr and str(lane.root) in refused.stderr
    assert all(leftovers.marker_still_there(pid, lane.node(), lane.root) for pid in workers)

    adopted = in_copy("recover", "--adopt", "--json")  # the operator's mistake: the original runs
    assert adopted.returncode in (0, 3), adopted.stderr
    assert all(leftovers.marker_still_there(pid, lane.node(), lane.root) for pid in workers)
    renewed = in_copy("recover", "--new-node")
    assert renewed.returncode in (0, 3), renewed.stderr
    assert Home(copy).node_id() != lane.node()
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=60) == 0


def test_a_board_file_linked_into_two_homes_is_served_by_neither(
    lane: Lane, tmp_path: Path
) -> None:
    """Each home's daemon ran every task of a hard-linked board (the same run ids, two
    -wal files on one database). Now both refuse it, and serve it once it is unlinked."""
    other = Lane(tmp_path / "other")
    other.store.close()
    os.unlink(other.home.board_file(BOARD))
    os.link(lane.home.board_file(BOARD), other.home.board_file(BOARD))
    tasks = [lane.add(f"linked {n}") for n in range(3)]
    daemons = [lane.start(), other.start()]
    try:
        for runner in (lane, other):
            lane.wait(
                lambda runner=runner: "has 2 hard links" in (runner.root / "daemon.log").read_text(
                    errors="replace"
                ),
                what=f"{runner.root.name} to refuse the linked board",
            )
        assert [lane.board.get_task(t.id).status for t in tasks] == [Status.READY] * 3
        os.unlink(other.home.board_file(BOARD))  # the other home lets go of it
        lane.wait(lambda: lane.all_done(), what="the tasks, once the board has one name")
        assert all(len(lane.runs(t.id)) == 1 for t in tasks)
    finally:
        for daemon in daemons:
            daemon.send_signal(signal.SIGTERM)
        other.stop_all()
    assert daemons[0].wait(timeout=60) == 0
