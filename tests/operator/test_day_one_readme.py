"""The README's claims, each held by a run of the installed ``lane-runner`` script (issue
27): its walkthrough works as written, every command takes ``--json``, every command is
documented and every command it names exists, every simulator scenario is documented."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import orjson
import pytest

from lane_runner.cli.main import build_parser, commands
from lane_runner.providers.simulators.play import SCENARIOS
from tests.harness import Lane, git
from tests.operator.console import console

README = (Path(__file__).parents[2] / "README.md").read_text()
FLAT = " ".join(README.split())  # wrapped lines read as one
LEAVES = [
    parser.prog.removeprefix("lane-runner ").split()
    for parser, group in commands(build_parser())
    if group is None
]
GROUPS = {
    parser.prog.removeprefix("lane-runner "): set(group.choices)
    for parser, group in commands(build_parser())
    if group is not None
}


def walkthrough() -> list[list[str]]:
    """The commands of the README's "Using it" block, continuation lines joined."""
    block = README.split("## Using it", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    joined = block.replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in joined.splitlines() if line.strip()]


def test_the_walkthrough_works_as_written(lane: Lane, tmp_path: Path) -> None:
    home = tmp_path / "user"
    project = home / "src" / "project"
    project.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=project)
    git("commit", "-q", "--allow-empty", "-m", "first", cwd=project)
    (lane.root / "issue.md").write_text("The parser test fails one run in ten.\n")
    env = {"HOME": str(home), "LANE_RUNNER_SIMULATE": "true"}  # the bundled CLIs stand in
    added: str | None = None
    ran = []
    for argv in walkthrough():
        if argv[0] == "export":
            name, _, value = argv[1].partition("=")
            env[name] = value.replace("~", str(home), 1)
            continue
        assert argv[0] == "lane-runner", argv
        args = [arg.replace("~", str(home), 1) if arg.startswith("~") else arg for arg in argv[1:]]
        if args == ["run"]:
            continue  # the daemon runs until stopped; run --until-idle follows
        if args[:2] == ["status", "--watch"]:
            args += ["--count", "1"]
        if added is not None:
            args = [added if arg == "t-1a2b3c4d" else arg for arg in args]
        done = console(lane, *args, env=env)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        ran.append(args[:2])
        if args[:2] == ["task", "add"]:
            added = done.stdout.split()[1].split("/")[1]  # "added main/t-… (ready)"
    assert ["task", "show"] in ran and ["status", "--watch"] in ran
    shown = console(lane, "task", "show", str(added), "--json", env=env)
    assert orjson.loads(shown.stdout)["status"] == "done"


@pytest.mark.parametrize("path", LEAVES, ids=" ".join)
def test_every_command_takes_json(lane: Lane, path: list[str]) -> None:
    done = console(lane, *path, "--help")
    assert done.returncode == 0 and "--json" in done.stdout, done.stdout


def test_every_command_is_documented_and_every_documented_command_exists() -> None:
    undocumented = [" ".join(path) for path in LEAVES if " ".join(path) not in _named()]
    assert not undocumented, f"commands the README never names: {undocumented}"
    for group, actions in re.findall(r"lane-runner (\w+) ([a-z]+(?:\|[a-z]+)*)", FLAT):
        if group in GROUPS:
            unknown = set(actions.split("|")) - GROUPS[group]
            assert not unknown, f"the README names 'lane-runner {group} {actions}'"


def _named() -> set[str]:
    """Every command the README names: ``lane-runner task add``, ``task
    unblock|archive``, ``board create|delete`` as separate commands."""
    found = set()
    for group, actions in re.findall(r"(?=\b(\w+) ([a-z]+(?:\|[a-z]+)*))", FLAT):
        found |= {f"{group} {action}" for action in actions.split("|")}
    found |= set(re.findall(r"lane-runner (\w+)", FLAT))
    return found


def test_every_simulator_scenario_is_documented() -> None:
    missing = [name for name in sorted(SCENARIOS) if f"[sim:{name}" not in README]
    assert not missing, f"scenarios the README does not document: {missing}"
