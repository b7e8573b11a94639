"""A pool of worker users (``worker_users``, issue 47 case 2): two runs in flight never
share a user, the daemon's slots are bounded by the pool, a pool user that does not
exist or is root is refused at start, and a CLI any pool user could replace is refused
before anything runs it."""

from __future__ import annotations

import os
import pwd
import threading
from pathlib import Path

import pytest

from lane_runner import config
from lane_runner.errors import UsageError
from lane_runner.service import workerpool
from lane_runner.service.services import preflight
from lane_runner.service.workerpool import WorkerPool, probe_user

#: The pool .ci/run makes (lane-w1, lane-w2 of group lane-pool); the tests that switch
#: users need it and root.
POOL = tuple(filter(None, os.environ.get("LANE_POOL_USERS", "").split(",")))
as_pool = pytest.mark.skipif(
    os.geteuid() != 0 or len(POOL) < 2, reason="needs root and LANE_POOL_USERS (.ci/run)"
)


def test_choose_takes_the_first_user_no_run_holds() -> None:
    # caught: choose ignoring ``busy`` (both runs as lane-w1)
    assert workerpool.choose(("a", "b", "c"), set()) == "a"
    assert workerpool.choose(("a", "b", "c"), {"a"}) == "b"
    assert workerpool.choose(("a", "b"), {"a", "b"}) is None


def test_runs_in_flight_never_share_a_user_and_a_release_frees_one() -> None:
    pool = WorkerPool(("lane-w1", "lane-w2"))
    first, second = pool.lease(1), pool.lease(2)
    assert {first, second} == {"lane-w1", "lane-w2"}
    assert pool.lease(1) == first  # the same run asks again: the same user
    assert pool.lease(3) is None  # every user held
    pool.release(1)  # caught: a release that frees nothing (run 3 never gets a user)
    assert pool.lease(3) == first


def test_leases_from_many_threads_never_hand_one_user_to_two_runs() -> None:
    # caught: lease without its lock (two threads find the same user free)
    users = tuple(f"u{n}" for n in range(64))
    pool = WorkerPool(users)
    got: dict[int, str | None] = {}
    threads = [threading.Thread(target=lambda n=n: got.__setitem__(n, pool.lease(n)))
               for n in range(64)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(u for u in got.values() if u) == sorted(users)


def test_the_slots_are_bounded_by_the_pool() -> None:
    # caught: the daemon's concurrency not capped (a third run would find no user)
    assert WorkerPool(("a", "b")).cap(8) == 2
    assert WorkerPool(("a", "b", "c")).cap(1) == 1
    assert WorkerPool(()).cap(8) == 8  # no pool: the slots as configured


def test_a_run_works_as_its_leased_user(tmp_path: Path) -> None:
    # caught: for_run returning cfg unchanged (every run as worker_user)
    cfg = config.load(tmp_path, {"LANE_RUNNER_WORKER_USERS": "lane-w1,lane-w2",
                                 "LANE_RUNNER_WORKER_USER": "shared"})
    pool = WorkerPool(cfg.worker_users)
    assert pool.for_run(cfg, 7).worker_user == "lane-w1"
    assert pool.for_run(cfg, 8).worker_user == "lane-w2"
    with pytest.raises(RuntimeError, match="no worker user free"):
        pool.for_run(cfg, 9)  # never falls back to the shared worker_user
    assert WorkerPool(()).for_run(cfg, 9) is cfg


def test_the_pool_key_is_parsed_and_checked(tmp_path: Path) -> None:
    cfg = config.load(tmp_path, {"LANE_RUNNER_WORKER_USERS": " lane-w1, lane-w2 ,lane-w1"})
    assert cfg.worker_users == ("lane-w1", "lane-w2")  # caught: duplicates kept (one user twice)
    with pytest.raises(UsageError, match="not a user name"):
        config.load(tmp_path, {"LANE_RUNNER_WORKER_USERS": "lane-w1,../etc"})


def test_a_pool_naming_root_or_a_missing_user_is_refused() -> None:
    # caught: check_users accepting uid 0 (the agent's code would run as root)
    root = pwd.getpwuid(0).pw_name
    with pytest.raises(UsageError, match="uid is 0"):
        workerpool.check_users(("nobody", root))
    with pytest.raises(UsageError, match="does not exist"):
        workerpool.check_users(("lane-no-such-user-47",))
    workerpool.check_users(("nobody",))


def test_without_worker_user_the_version_probe_runs_as_the_pools_first(tmp_path: Path) -> None:
    # caught: probe_user reading worker_user only (--version run as root with a pool)
    cfg = config.load(tmp_path, {"LANE_RUNNER_WORKER_USERS": "nobody"})
    assert probe_user(cfg) == "nobody"
    assert probe_user(cfg.replace(worker_user="lane-ci")) == "lane-ci"


@as_pool
def test_a_cli_any_pool_user_can_replace_is_refused_unrun(
    tmp_path: Path, shared_dir: Path
) -> None:
    # caught: refusing only what worker_user can write (the second pool user's npm prefix)
    seen = shared_dir / "seen"
    owned = shared_dir / "npm-prefix"
    owned.mkdir()
    codex = owned / "codex"
    codex.write_text(f'#!/bin/sh\nid -u > "{seen}"\necho "codex-cli 0.171.0"\n')
    codex.chmod(0o755)
    os.chown(owned, pwd.getpwnam(POOL[1]).pw_uid, -1)  # the second pool user's own prefix
    cfg = config.load(tmp_path / "home", {
        "LANE_RUNNER_CODEX_BIN": str(codex), "LANE_RUNNER_WORKER_USERS": ",".join(POOL),
        "LANE_RUNNER_CLAUDE_BIN": str(codex.with_name("no-claude"))})
    with pytest.raises(UsageError, match=f"can be replaced by worker_user '{POOL[1]}'"):
        preflight(cfg)
    assert not seen.exists()  # nothing ran it


@as_pool
def test_one_pool_user_cannot_write_into_a_neighbours_private_files(shared_dir: Path) -> None:
    """The ground the pool stands on, from inside a task: code running as one pool user
    cannot rename a forged answer over a file the other user keeps in a 0700 folder, nor
    plant a file there, nor read it."""
    import subprocess

    victim, attacker = (pwd.getpwnam(user) for user in POOL[:2])
    outbox = shared_dir / "victim.out"
    outbox.mkdir(mode=0o700)
    os.chown(outbox, victim.pw_uid, victim.pw_gid)
    answer = outbox / "answer.json"
    subprocess.run(["runuser", "-u", victim.pw_name, "--", "sh", "-c",
                    f"echo real > {answer}"], check=True)
    forged = (f"echo FORGED > {shared_dir}/forged && mv -f {shared_dir}/forged {answer}; "
              f"echo planted > {outbox}/planted; cat {answer}")
    attack = subprocess.run(["runuser", "-u", attacker.pw_name, "--", "sh", "-c", forged],
                            capture_output=True, text=True)
    assert "real" not in attack.stdout
    assert answer.read_text() == "real\n"
    assert not (outbox / "planted").exists()


def test_doctor_names_the_pool_and_fails_on_a_user_it_cannot_use(tmp_path: Path) -> None:
    # caught: pool_checks not run, or passing a pool naming root
    from lane_runner.cli import doctor
    from lane_runner.cli.checks import Level

    assert doctor.pool_checks(config.load(tmp_path, {})) == []
    good = doctor.pool_checks(config.load(tmp_path, {"LANE_RUNNER_WORKER_USERS": "nobody"}))
    assert [c.level for c in good] == [Level.PASS] and "1 users (nobody)" in good[0].detail
    root = pwd.getpwuid(0).pw_name
    bad = doctor.pool_checks(config.load(tmp_path, {"LANE_RUNNER_WORKER_USERS": f"nobody,{root}"}))
    assert [c.level for c in bad] == [Level.FAIL] and "uid is 0" in bad[0].detail
    checks = doctor.run_all(config.load(tmp_path, {"LANE_RUNNER_WORKER_USERS": "nobody"}))
    assert any(c.name == "worker pool" for c in checks)



@as_pool
def test_doctor_checks_each_pool_users_logins_as_that_user(
    tmp_path: Path, shared_dir: Path
) -> None:
    """Each pool user's CLI home holds its own logins, and a run may lease any of them:
    doctor asks each CLI as each user. Catches: the login asked as root (or only as the
    pool's first user), so a pool user its CLIs are not logged in as passed unseen."""
    from lane_runner.cli import doctor_clis
    from lane_runner.cli.checks import Level
    from lane_runner.home import Home

    first, second = POOL[:2]
    codex, claude = shared_dir / "codex", shared_dir / "claude"
    codex.write_text(f'#!/bin/sh\n[ "$1" = login ] || {{ echo "codex-cli 0.171.0"; exit 0; }}\n'
                     f'[ "$(id -un)" = {first} ] && {{ echo "Logged in using an API key"; '
                     f'exit 0; }}\necho "Not logged in"; exit 1\n')  # the first user's alone
    claude.write_text('#!/bin/sh\necho "2.1.332 (Claude Code)"\n')  # no key, no credentials
    for cli in (codex, claude):
        cli.chmod(0o755)
    cfg = config.load(tmp_path / "home", {
        "LANE_RUNNER_CODEX_BIN": str(codex), "LANE_RUNNER_WORKER_USERS": ",".join(POOL),
        "LANE_RUNNER_CLAUDE_BIN": str(claude)})
    checks = {c.name: c for c in doctor_clis.cli_checks(cfg, Home(cfg.home))}
    assert checks[f"claude login as {first}"].level is Level.WARN  # codex lanes run
    assert checks[f"codex login as {first}"].level is Level.PASS
    refused = checks[f"codex login as {second}"]
    assert refused.level is Level.FAIL  # no CLI could run a run leased that user
    assert f"not logged in as the worker user {second}" in refused.detail
    assert f"sudo -u {second} -H codex login" in refused.fix
    assert "codex login" not in checks  # never asked as root


@as_pool
def test_outside_a_run_git_works_as_the_pool_user_owning_the_worktree(shared_dir: Path) -> None:
    """The cleanup sweep and recovery work in a finished task's worktree as its owner.
    Catches: ``owner_of`` answering ``worker_user`` (None: root) under a pool, or a user
    outside the pool owning the folder being taken."""
    pool = config.load(shared_dir / "pool", {"LANE_RUNNER_WORKER_USERS": ",".join(POOL)})
    mine = shared_dir / "mine"
    mine.mkdir()
    os.chown(mine, pwd.getpwnam(POOL[1]).pw_uid, -1)
    assert workerpool.owner_of(mine, pool) == POOL[1]
    strangers = shared_dir / "strangers"
    strangers.mkdir()  # root's
    assert workerpool.owner_of(strangers, pool) is None
    alone = config.load(shared_dir / "alone", {"LANE_RUNNER_WORKER_USER": POOL[0]})
    assert workerpool.owner_of(mine, alone) == POOL[0]  # no pool: worker_user, as always
