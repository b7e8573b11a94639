"""What a run writes down as it goes: comments on the board, and its lane state
(``lanes/<board>/<task>.json``, docs/ARCHITECTURE.md §3.2) through the journal's atomic
write. A comment is something the run can do without: skipped while the board is away."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from journal import Document
from journal import names as journal_names
from lane_runner import display, redact
from lane_runner.board.base import BoardUnavailable
from lane_runner.run.claimed import Claimed

log = logging.getLogger(__name__)
AUTHOR = "lane-runner"
T = TypeVar("T")


class Notebook:
    def __init__(self, claimed: Claimed) -> None:
        self.c = claimed

    def note(self, text: str) -> None:
        """A comment by the runner, skipped while the board is away."""
        self.guarded(self.say, text)

    def say(self, text: str) -> None:
        """A comment by the runner; it may quote a worker's words, so bounded and redacted."""
        c = self.c
        c.board.comment(c.task.id, redact.shown(text, display.MAX_LOG_CHARS), author=AUTHOR)

    def guarded(self, operation: Callable[..., T], *args: object) -> T | None:
        """A board write the run can do without (a comment): skipped when the board is away."""
        try:
            return operation(*args)
        except BoardUnavailable as error:
            log.warning(
                "board %s unavailable for %s: %s; skipped",
                self.c.task.board,
                getattr(operation, "__name__", operation),
                error,
            )
            return None

    def save(self) -> None:
        self.c.s.journal.write_documents(self.c.task.board, [self.document()])

    def save_if_possible(self) -> None:
        """Save the state on the way out of a run. A failing disk loses only this update
        (one cooldown or rejection uncounted), which is safe: the board write follows."""
        try:
            self.save()
        except OSError as error:
            log.warning(
                "lane state of %s/%s not saved: %s", self.c.task.board, self.c.task.id, error
            )

    def document(self) -> Document:
        """The lane state as the journal writes it."""
        return Document(journal_names.lane_state(self.c.task.id), self.c.state.to_document())
