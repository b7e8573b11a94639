"""The redaction gate of the board: every text a board stores from the runner passes it.

A comment, a run's reason, a stop request's or a pause's reason, a completion's summary,
result and metadata (which the events and ``task show`` carry on) come from workers,
hooks, routers and CLIs, any of which may quote a credential (docs/secrets-and-budgets.md).
Redacting at each caller missed some (the cleanup sweep's comments, a router's error
body in a block reason); here it is done once, where the text enters the board layer.

Every backend's board derives from :class:`RedactedWrites`. Each class that does,
and each subclass after it (``PostgresBoard`` overrides ``complete``), has the methods
named in :data:`GATED` wrapped as the class is made, so an override cannot forget the
gate. A task's title and body are not gated: they are the operator's words and the
worker's instructions (``key=value`` there is often what the task is about); every
output shows them redacted instead (``cli/output.py``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any

from lane_runner import redact

#: The board's writes and which of their parameters carry text from outside.
GATED: Mapping[str, tuple[str, ...]] = {
    "comment": ("body",),
    "retry": ("comment",),
    "complete": ("result", "summary", "metadata"),
    "block": ("reason",),
    "reclaim": ("reason",),
    "request_stop": ("reason",),
    "pause": ("reason",),
    "notice_failed": ("error",),
    "approve": ("note",),
    "deny": ("reason",),
    "end_review": ("summary", "findings"),
    "hand_back_review": ("reason",),
}


class RedactedWrites:
    """Base of every board: its writes' texts are redacted before its own code sees them."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, parameters in GATED.items():
            method = cls.__dict__.get(name)
            if method is not None:
                setattr(cls, name, _gated(method, parameters))


def _gated(method: Callable[..., Any], parameters: tuple[str, ...]) -> Callable[..., Any]:
    """``method`` with each of ``parameters`` passed through ``redact.document``
    (``redact.text`` for a string; a dict's strings, for a result or metadata)."""
    signature = inspect.signature(method)
    missing = set(parameters) - set(signature.parameters)
    if missing:
        raise TypeError(f"{method.__qualname__} lacks the gated parameters {sorted(missing)}")

    @functools.wraps(method)
    def gated(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        for name in parameters:
            if name in bound.arguments:
                bound.arguments[name] = redact.document(bound.arguments[name])
        return method(*bound.args, **bound.kwargs)

    return gated
