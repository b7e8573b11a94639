"""The CLIs are never executed as root (issue 47, case 4): ``--version`` runs as the worker
user, and a CLI the worker user could replace is refused before anything runs it."""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

import pytest

from lane_runner import config, files
from lane_runner.errors import UsageError
from lane_runner.service.services import preflight

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")

WORKER = "nobody"
#: A codex as far as its --version goes, which writes down who ran it.
FAKE_CODEX = """#!/bin/sh
id -u > "{seen}"
echo "codex-cli 0.171.0"
"""


def fake_codex(where: Path, seen: Path) -> Path:
    script = where / "codex"
    script.write_text(FAKE_CODEX.format(seen=seen))
    script.chmod(0o755)
    return script


def configured(home: Path, codex: Path) -> config.Config:
    return config.load(home, {"LANE_RUNNER_CODEX_BIN": str(codex),
                              "LANE_RUNNER_WORKER_USER": WORKER,
                              "LANE_RUNNER_CLAUDE_BIN": str(codex.with_name("no-claude"))})


def test_the_version_probe_runs_as_the_worker_user(tmp_path: Path, shared_dir: Path) -> None:
    seen = shared_dir / "seen" / "uid"
    seen.parent.mkdir(mode=0o777)
    seen.parent.chmod(0o777)
    codex = fake_codex(shared_dir, seen)
    with pytest.raises(UsageError, match="claude_bin"):  # the claude named is missing
        preflight(configured(tmp_path / "home", codex))
    assert seen.read_text().strip() == str(pwd.getpwnam(WORKER).pw_uid)


def test_a_cli_the_worker_user_can_replace_is_refused_unrun(
    tmp_path: Path, shared_dir: Path
) -> None:
    seen = shared_dir / "seen"
    owned = shared_dir / "npm-prefix"
    owned.mkdir()
    codex = fake_codex(owned, seen)
    os.chown(owned, pwd.getpwnam(WORKER).pw_uid, -1)  # the worker's own prefix
    with pytest.raises(UsageError, match=f"can be replaced by worker_user '{WORKER}'"):
        preflight(configured(tmp_path / "home", codex))
    assert not seen.exists()  # nothing ran it


def test_what_the_worker_user_may_change(shared_dir: Path) -> None:
    user = pwd.getpwnam(WORKER)
    program = shared_dir / "bin" / "cli"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    assert files.writable_by(program, WORKER) is None
    program.parent.chmod(0o777 | stat.S_ISVTX)  # like /tmp: nobody replaces root's file
    assert files.writable_by(program, WORKER) is None
    program.parent.chmod(0o777)
    assert files.writable_by(program, WORKER) == program.parent
    program.parent.chmod(0o775)
    os.chown(program.parent, -1, user.pw_gid)  # group-writable, the worker's group
    assert files.writable_by(program, WORKER) == program.parent
    os.chown(program.parent, -1, 0)
    program.parent.chmod(0o755)
    planted = shared_dir / "planted"
    planted.write_text("#!/bin/sh\n")
    os.chown(planted, user.pw_uid, -1)
    link = shared_dir / "bin" / "link"
    link.symlink_to(planted)
    assert files.writable_by(link, WORKER) == planted  # the link's target is what runs
