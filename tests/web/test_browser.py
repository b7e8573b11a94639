"""The console in a real browser against a live daemon serving it (``web_listen``): each
page loads, a task moves from ready to done on the open board page without a reload, a
running task's log grows on its page, and retry works with the token and is refused
without it. Screenshots are kept under the test's ``tmp_path`` (the path is printed)."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lane_runner.board.model import Status
from tests.harness import Lane
from tests.web.browser import browser, free_port, shooter  # noqa: F401 - the fixture
from tests.web.conftest import TOKEN

By = pytest.importorskip("selenium.webdriver.common.by", reason="no selenium").By
_support = pytest.importorskip("selenium.webdriver.support.ui", reason="no selenium")
StaleElementReferenceException = pytest.importorskip(
    "selenium.common.exceptions", reason="no selenium"
).StaleElementReferenceException
WebDriverWait = _support.WebDriverWait

WAIT = 60.0
#: Seconds between a simulated CLI's events: its log grows while the task runs.
EVENT_DELAY = 0.7


def _serve(lane: Lane, gate: Path) -> str:
    port = free_port()
    lane.write_config(web_listen=f"127.0.0.1:{port}")
    lane.extra_env.update(
        LANE_RUNNER_WEB_TOKEN=TOKEN,
        LANE_RUNNER_SIM_GATE=str(gate),
        LANE_RUNNER_SIM_DELAY=str(EVENT_DELAY),  # a run's events come over seconds
    )
    lane.start()
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            with urllib.request.urlopen(f"{url}/api/v1/boards", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    lane.wait(answers, what="the daemon's web console")
    return url


def _until(driver: Any, condition: Callable[[Any], Any], what: str) -> Any:
    """``condition`` once true; asked again when the live update swapped the page's
    ``<main>`` between finding an element and reading it (a stale element)."""
    return WebDriverWait(
        driver, WAIT, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,)
    ).until(condition, what)


def _click(driver: Any, element_id: str) -> None:
    _until(driver, lambda d: d.find_element(By.ID, element_id).click() or True, element_id)


def _column_of(driver: Any, task_id: str) -> str | None:
    found = driver.find_elements(By.CSS_SELECTOR, f"[data-task='{task_id}']")
    if not found:
        return None
    column = found[0].find_element(By.XPATH, "ancestor::div[@data-status]")
    return str(column.get_attribute("data-status"))


def _mark(driver: Any) -> None:
    """A mark in the page's JavaScript state: a reload would wipe it."""
    driver.execute_script("window.consoleTestMark = 'kept';")


def _marked(driver: Any) -> bool:
    return bool(driver.execute_script("return window.consoleTestMark === 'kept';"))


def test_the_console_in_a_browser(lane: Lane, browser: Any, tmp_path: Path) -> None:  # noqa: F811
    shoot = shooter(browser, tmp_path / "screenshots")
    gate = tmp_path / "sim-gate"
    assert lane.cli("pause", "--reason", "before the browser looks").returncode == 0
    first = lane.add("Make the board page live", body="a task to watch move").id
    url = _serve(lane, gate)

    # ready -> done on the open board page, with no reload
    browser.get(f"{url}/")
    _until(browser, lambda d: _column_of(d, first) == "ready", "the task to show as ready")
    _until(browser, lambda d: "on" in d.find_element(By.ID, "live").get_attribute("class"),
           "the live stream to open")
    _mark(browser)
    assert lane.cli("resume").returncode == 0
    _until(browser, lambda d: _column_of(d, first) == "done", "the task to show as done")
    assert _marked(browser), "the board page reloaded"
    shoot("board-done")

    # a running task's log grows on its page
    gate.touch()
    second = lane.add("Follow my log", body="a task whose log is followed").id
    lane.wait(lambda: lane.board.get_task(second).status is Status.RUNNING, what="a claim")
    browser.get(f"{url}/boards/work/tasks/{second}")
    first_lines = _until(browser, lambda d: d.find_element(By.ID, "log").text.strip(),
                         "a first line")
    before = set(first_lines.splitlines())
    _mark(browser)
    shoot("task-running")
    gate.unlink()

    def followed(driver: Any) -> bool:
        """A line the page did not have, while the task still runs: the board has not
        changed, so no fresh page brought it; the log's own stream did."""
        lines = set(driver.find_element(By.ID, "log").text.splitlines())
        return bool(lines - before) and driver.find_element(By.ID, "task-status").text == "running"

    _until(browser, followed, "the log to grow while the task runs")
    shoot("task-following")
    _until(browser, lambda d: d.find_element(By.ID, "task-status").text == "done",
           "the task page to show done")
    assert _marked(browser), "the task page reloaded"
    shoot("task-done")

    # retry: refused without the token, done with it
    third = lane.add("Needs a person", body="[sim:blocked]").id
    lane.wait(lambda: lane.board.get_task(third).status is Status.BLOCKED, what="a block")
    browser.get(f"{url}/boards/work/tasks/{third}")
    _click(browser, "control-retry")
    refusal = _until(browser, lambda d: d.find_elements(By.ID, "refusal"), "a refusal")
    assert "sign in" in refusal[0].text
    shoot("retry-refused")
    assert lane.board.get_task(third).status is Status.BLOCKED
    browser.get(f"{url}/login?next=/boards/work/tasks/{third}")
    browser.find_element(By.ID, "token").send_keys(TOKEN)
    browser.find_element(By.ID, "sign-in").click()
    _until(browser, lambda d: d.find_elements(By.ID, "control-retry"), "the task page again")
    _click(browser, "control-retry")
    _until(browser, lambda d: "retried" in d.find_element(By.CSS_SELECTOR, ".said").text,
           "the retry's message")
    shoot("retry-done")
    assert "retried" in [event.kind for event in lane.board.events(third)]

    # every page loads
    for path, heading in (("/runs", "Runs in flight"), ("/usage", "Usage since"),
                          ("/health", "Health")):
        browser.get(f"{url}{path}")
        _until(browser, lambda d, h=heading: d.find_element(By.TAG_NAME, "h1").text.startswith(h),
               f"the {path} page")
        shoot(path.strip("/"))
    browser.get(f"{url}/")  # the board page last: its screenshot is the README's
    shoot("board")
