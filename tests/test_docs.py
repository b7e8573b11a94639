"""The documentation holds (issue 39): the configuration page's table is what ``config.KEYS``
declares, and the pages build as a site with no broken link (``mkdocs build --strict``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lane_runner import config
from lane_runner.cli import reference

ROOT = Path(__file__).resolve().parents[1]


def test_the_configuration_page_is_generated_from_the_keys() -> None:
    text = reference.PAGE.read_text(encoding="utf-8")
    assert text == reference.page_with_table(text), (
        "docs/configuration.md's table is stale: python -m lane_runner.cli.reference"
    )


def test_every_key_is_on_the_configuration_page() -> None:
    text = reference.PAGE.read_text(encoding="utf-8")
    assert all(f"| `{key.name}` |" in text for key in config.KEYS)


def test_the_docs_build_as_a_site_with_no_broken_link(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    assert (tmp_path / "configuration" / "index.html").is_file()
