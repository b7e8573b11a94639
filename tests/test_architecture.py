"""docs/ARCHITECTURE.md matches the code (issue 29): every module under ``lane_runner/``
is in the layout table of §2, named in its package's row (or, at the top level, by its
path), so the map cannot quietly fall behind the code."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_ROW = re.compile(r"^\| (?P<paths>[^|]+) \| (?P<text>.+) \|$")
_BRACES = re.compile(r"\{([^}]*)\}")


def _expanded(path: str) -> list[str]:
    """``lane_runner/{a,b}.py`` -> ``lane_runner/a.py``, ``lane_runner/b.py``."""
    found = _BRACES.search(path)
    if found is None:
        return [path]
    return [
        expanded
        for choice in found.group(1).split(",")
        for expanded in _expanded(path[: found.start()] + choice + path[found.end() :])
    ]


def layout(document: str) -> dict[str, str]:
    """The layout table of §2: each path its row names (braces expanded) -> the row's text."""
    section = document.split("\n## 2. Layout\n", 1)[1].split("\n## 3.", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        match = _ROW.match(line)
        if match is None:
            continue
        for path in re.findall(r"`([^`]+)`", match["paths"]):
            for each in _expanded(path):
                rows[each] = match["text"]
    return rows


def unmapped(repo: Path = REPO) -> list[str]:
    """The modules under ``lane_runner/`` the layout table leaves out."""
    rows = layout((repo / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    package_root = repo / "lane_runner"
    missing = []
    for module in sorted(package_root.rglob("*.py")):
        if module.name == "__init__.py" or "__pycache__" in module.parts:
            continue
        relative = module.relative_to(repo).as_posix()
        if module.parent == package_root:
            named = relative in rows
        else:
            text = rows.get(f"{module.parent.relative_to(repo).as_posix()}/", "")
            named = f"`{module.stem}`" in text or f"`{module.name}`" in text
        if not named:
            missing.append(relative)
    return missing


def test_every_module_is_in_the_layout_table() -> None:
    assert unmapped() == [], "add these to docs/ARCHITECTURE.md §2, in their package's row"


def test_the_table_names_no_module_that_is_gone() -> None:
    """A top-level path the table names exists (a module renamed leaves no ghost)."""
    rows = layout((REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    named = [path for path in rows if path.startswith("lane_runner/")]
    ghosts = [path for path in named if not (REPO / path).exists()]
    assert ghosts == []


#: One concept per module, none over this many lines (the project's rule, issue 40).
MAX_LINES = 600


def long_modules(repo: Path = REPO) -> list[str]:
    """The modules of ``lane_runner/`` and ``journal/`` over ``MAX_LINES``, with their length."""
    found = []
    for package in ("lane_runner", "journal"):
        for module in sorted((repo / package).rglob("*.py")):
            if "__pycache__" in module.parts:
                continue
            lines = len(module.read_text(encoding="utf-8").splitlines())
            relative = module.relative_to(repo).as_posix()
            if lines > MAX_LINES:
                found.append(f"{relative}: {lines} lines")
    return found


def test_no_module_grows_past_the_limit() -> None:
    """A module past 600 lines is split by concept (board/sql/, board/hermes/ show how)."""
    assert long_modules() == []
