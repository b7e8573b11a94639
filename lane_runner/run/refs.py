"""Which of a few refs a repository has, and the commits they name, in one git call.

Choosing the task's branch asks up to five questions of the repository (its twin, the
branch, each folder above it, and HEAD for a new branch's start), and each was a
``git rev-parse --verify`` of its own: a supervised process tree per question
(``run/command.py``), most of the runner's own CPU per task (bench/FINDINGS.md).
``git cat-file --batch-check`` answers them all from one process, names read on its
stdin, resolved as ``rev-parse --verify`` resolves them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from lane_runner.run import git

#: What ``cat-file --batch-check`` prints for each name: its object and that object's type.
FORMAT = "--batch-check=%(objectname) %(objecttype)"


@dataclass(frozen=True)
class Found:
    """The object a name resolves to, and its type (``commit`` for a branch's tip)."""

    sha: str
    kind: str


def parse(names: list[str], output: str) -> dict[str, Found]:
    """The names ``output`` resolved, in order (pure): a ``missing`` or ``ambiguous`` line
    (or none at all: git stopped short) leaves its name out."""
    found: dict[str, Found] = {}
    for name, line in zip(names, output.splitlines(), strict=False):
        words = line.split()
        if len(words) == 2 and words[1] not in {"missing", "ambiguous"}:
            found[name] = Found(words[0], words[1])
    return found


def look_up(source: Path, names: Iterable[str], owner: str | None) -> Mapping[str, Found]:
    """What each of ``names`` names in the repository at ``source``; a name it lacks is
    absent. A failed git (no repository) answers nothing, as each ``--verify`` would."""
    wanted = list(dict.fromkeys(names))
    said = git.run("cat-file", FORMAT, cwd=source, owner=owner,
                   stdin="".join(f"{name}\n" for name in wanted))
    return parse(wanted, said.stdout) if said.returncode == 0 else {}
