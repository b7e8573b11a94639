"""Headless Chromium for the console's browser tests (Debian's ``chromium`` and
``chromium-driver``, which ``.ci/run`` installs), driven by Selenium.

Without the browser the tests skip, saying so, unless ``LANE_CONTRACT_REQUIRED`` is set
(as ``.ci/run`` sets it): there a missing browser fails them.
"""

from __future__ import annotations

import os
import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

SHOT_SIZE = (1400, 900)


def _binaries() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    """A headless Chromium with its own profile under ``tmp_path``."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    found = _binaries()
    if found is None:
        why = "no chromium and chromedriver on PATH (apt-get install chromium chromium-driver)"
        if os.environ.get("LANE_CONTRACT_REQUIRED"):
            pytest.fail(f"{why}; LANE_CONTRACT_REQUIRED is set")
        pytest.skip(why)
    options = webdriver.ChromeOptions()
    options.binary_location = found[0]
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", f"--user-data-dir={tmp_path / 'chromium'}",
                     f"--window-size={SHOT_SIZE[0]},{SHOT_SIZE[1]}"):
        options.add_argument(argument)
    service = webdriver.ChromeService(executable_path=found[1],
                                      log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()


def shooter(driver: Any, directory: Path) -> Callable[[str], Path]:
    """Saves a screenshot of the page by name into ``directory`` (the test's artifacts)."""
    directory.mkdir(parents=True, exist_ok=True)
    print(f"console screenshots in {directory}")

    def shoot(name: str) -> Path:
        path = directory / f"{name}.png"
        driver.save_screenshot(str(path))
        return path

    return shoot
