"""A Hermes Agent home as a board store: every live board of it, or those named."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from lane_runner import suggest
from lane_runner.board import retry
from lane_runner.board.hermes import home
from lane_runner.board.hermes.board import HermesBoard
from lane_runner.board.hermes.refusals import READ_ONLY
from lane_runner.board.hermes.watch import HermesWatch
from lane_runner.errors import NotFound, UsageError

log = logging.getLogger(__name__)


class HermesStore:
    """The boards of one Hermes home: all non-archived ones, or those ``boards`` names."""

    def __init__(
        self,
        url: str,
        failure_limit: int = 3,
        boards: Sequence[str] = (),
        wait_budget: float = retry.DEFAULT_BUDGET,
    ) -> None:
        self._kb = home.kanban()
        self._budget = wait_budget
        self.home = home.locate(url, self._kb)
        home.pin(self.home)
        self._failure_limit = failure_limit
        self._only = tuple(boards)
        self._boards: dict[str, HermesBoard] = {}
        self._lock = threading.Lock()
        self._missing_reported: set[str] = set()
        # The boards as they are now: a change from here on wakes the first wait.
        self._watch = HermesWatch(self.home, self.board_slugs)

    def facts(self) -> str:
        """What ``doctor`` reports: the home and the hermes-agent release serving it."""
        version = home.installed_version()
        return f"{self.home} with hermes-agent {version} (kanban API checked)"

    def board_slugs(self) -> list[str]:
        try:
            listed = [str(entry["slug"]) for entry in self._kb.list_boards(include_archived=False)]
        except (OSError, ValueError) as error:
            log.error("cannot list the boards of Hermes home %s: %s", self.home, error)
            return []
        present = [s for s in listed if home.board_db(self.home, s).is_file()]
        if not self._only:
            return present
        for slug in set(self._only) - set(present) - self._missing_reported:
            self._missing_reported.add(slug)
            log.warning("hermes_boards names %r, which is not a live board of %s", slug, self.home)
        return [slug for slug in present if slug in self._only]

    def board(self, slug: str) -> HermesBoard:
        with self._lock:
            opened = self._boards.get(slug)
        if opened is not None:
            return opened
        if slug not in self.board_slugs():
            raise NotFound(
                f"no Hermes board {slug!r} served from {self.home}"
                f"{suggest.hint(slug, self.board_slugs())}; create it with "
                f"'hermes kanban boards create {slug}' (see 'hermes kanban boards list')"
                + (", and name it in the hermes_boards setting" if self._only else "")
            )
        opened = HermesBoard(
            slug, home.board_db(self.home, slug), self._kb, self._failure_limit, self._budget
        )
        with self._lock:
            return self._boards.setdefault(slug, opened)

    def create_board(self, slug: str) -> HermesBoard:
        raise UsageError(READ_ONLY.format(what="create boards", command=f"boards create {slug}"))

    def delete_board(self, slug: str, *, force: bool = False) -> int:
        raise UsageError(READ_ONLY.format(what="delete boards", command=f"boards rm {slug}"))

    def wait_for_change(self, timeout: float) -> bool:
        """True as soon as any served board's database (or the set of boards) changed."""
        return self._watch.wait(timeout)

    def close(self) -> None:
        self._watch.close()
        with self._lock:
            self._boards.clear()
