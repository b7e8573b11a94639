"""Fixtures every test folder may use: a fresh PostgreSQL database per test; and the
Hypothesis profile of the whole suite (no per-example deadline).

The server is the machine's (``.ci/run`` starts it); ``LANE_RUNNER_TEST_POSTGRES``
names another one. Each test gets its own database, dropped afterwards, so tests
never see each other's boards. Without a reachable server the test is skipped
with the reason.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings

#: Hypothesis' per-example deadline is a timed assertion: on a shared machine whose other
#: core is busy (pytest-xdist's other workers, CI neighbours) a file written and fsynced
#: may take ten times its usual time. Properties are checked for what they say, not speed.
settings.register_profile("lane-runner", deadline=None)
settings.load_profile("lane-runner")

ADMIN_URL = os.environ.get(
    "LANE_RUNNER_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def database_url(name: str) -> str:
    """``ADMIN_URL`` with its database replaced by ``name``."""
    base, _, _ = ADMIN_URL.rpartition("/")
    return f"{base}/{name}"


@pytest.fixture
def new_postgres_database() -> Iterator[Callable[[], str]]:
    """Makes new, empty databases on the test server (each call one), dropped afterwards."""
    psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    made: list[str] = []

    def make() -> str:
        try:
            admin = psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=3)
        except psycopg.OperationalError as error:
            pytest.skip(f"no PostgreSQL server at {ADMIN_URL} ({error}); .ci/run starts one")
        name = f"lr_test_{secrets.token_hex(6)}"
        with admin:
            admin.execute(f"CREATE DATABASE {name}")
        made.append(name)
        return database_url(name)

    yield make
    for name in made:
        with psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=10) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def postgres_database(new_postgres_database: Callable[[], str]) -> str:
    """The URL of a new, empty database on the test server."""
    return new_postgres_database()


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory an unprivileged worker user can enter (pytest's own tmp dirs are 0700),
    removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="lane-runner-shared-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def pgbouncer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """The port of a PgBouncer in transaction mode in front of the test server (one per
    pytest process; every database name is forwarded)."""
    from bench import pgbouncer as bouncer

    why = bouncer.missing()
    if why:
        pytest.skip(why)
    with bouncer.running(tmp_path_factory.mktemp("pgbouncer"), ADMIN_URL) as port:
        yield port


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Two closing sections. The crash campaign's counts (``tests/postgres/test_campaign.py``),
    whether it passed or failed: a ``campaign`` property of its report, which travels
    from a pytest-xdist worker to the session that prints. Then one line per folder of
    skipped tests, naming what they need: on a fresh machine the README's test command
    skips what ``.ci/run`` sets up first (the pinned CLIs, PgBouncer, podman), and a
    reader should not have to dig through ``-ra``'s lines to learn it."""
    for outcome in ("passed", "failed"):
        for report in terminalreporter.getreports(outcome):
            for name, value in report.user_properties:
                if name == "campaign":
                    terminalreporter.write_line(str(value))
    groups: dict[str, Counter[str]] = {}
    for report in terminalreporter.stats.get("skipped", []):
        folder = "/".join(report.nodeid.split("::")[0].split("/")[:2])
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        groups.setdefault(folder, Counter())[reason.removeprefix("Skipped: ")] += 1
    if not groups:
        return
    terminalreporter.section("skipped, by folder: what each needs (.ci/run sets it up)")
    for folder, reasons in sorted(groups.items()):
        reason, _ = reasons.most_common(1)[0]
        more = f" (and {len(reasons) - 1} other reasons)" if len(reasons) > 1 else ""
        terminalreporter.write_line(f"{folder}: {sum(reasons.values())} skipped: {reason}{more}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Iterator[None]:
    """A failed test that ran daemons in a home shows the end of their log: a daemon that
    died by a signal (a crash in a C extension, which ``faulthandler`` writes there) or
    exited early says why in CI's output, not only in a temporary directory gone since."""
    report: pytest.TestReport = yield
    if report.failed and call.when == "call":
        for name in ("lane", "real_lane"):
            root = getattr(getattr(item, "funcargs", {}).get(name), "root", None)
            log = Path(root) / "daemon.log" if root else None
            if log is not None and log.is_file():
                tail = log.read_bytes()[-6000:].decode(errors="replace")
                report.sections.append((f"{name}'s daemon.log (its end)", tail))
    return report
