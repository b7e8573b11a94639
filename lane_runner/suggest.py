""""Did you mean": the name closest to one that was mistyped (``board mian``, a config
key ``concurency``), from the names that exist. One suggestion, only when it is close
enough that it is likely what was meant."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: How alike a name must be (difflib's ratio) to be offered.
CUTOFF = 0.6


def closest(word: str, names: Iterable[str]) -> str | None:
    """The name most like ``word``, or None when none is close."""
    found = difflib.get_close_matches(word, list(names), n=1, cutoff=CUTOFF)
    return found[0] if found else None


def hint(word: str, names: Iterable[str]) -> str:
    """``" (did you mean 'main'?)"`` to append to the name in an error, or ``""``."""
    found = closest(word, names)
    return f" (did you mean {found!r}?)" if found is not None else ""
