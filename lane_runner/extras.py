"""How to install an optional part (``postgres``, ``hermes``): one hint, from the metadata.

lane-runner is not on PyPI, so ``pip install 'lane-runner[postgres]'`` fails; what works
is the extra's own requirements, or ``pip install '.[postgres]'`` in a checkout. The
requirements are read from the installed distribution's metadata, so a hint can never
name a package the extra does not bring.
"""

from __future__ import annotations

import importlib.metadata
import re

DISTRIBUTION = "lane-runner"
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def requirements(extra: str) -> list[str]:
    """The requirements ``extra`` adds, as the metadata spells them (empty when unknown)."""
    try:
        declared = importlib.metadata.requires(DISTRIBUTION) or []
    except importlib.metadata.PackageNotFoundError:
        return []  # run from a source tree that was never installed: the checkout hint stands
    found = []
    for line in declared:
        requirement, _, marker = line.partition(";")
        named = _EXTRA.search(marker)
        if named is not None and named.group(1) == extra:
            found.append(requirement.strip())
    return found


def install_hint(extra: str) -> str:
    """``pip install 'psycopg[binary]>=3.1' ...`` into lane-runner's environment, or from
    a checkout ``pip install '.[extra]'``."""
    wanted = " ".join(f"'{requirement}'" for requirement in requirements(extra))
    checkout = f"from a lane-runner checkout: pip install '.[{extra}]'"
    if not wanted:
        return checkout
    return f"pip install {wanted} (into lane-runner's environment), or {checkout}"
