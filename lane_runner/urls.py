"""URLs the runner checks before it points anything at them.

Apart from ``names.py`` because the provider adapters check their gateways with it,
and ``names.py`` itself asks the adapters' registry which providers there are.
"""

from __future__ import annotations

from urllib.parse import urlsplit


def is_http_url(value: str) -> bool:
    """True for an ``http://`` or ``https://`` URL with a host and a valid port (a
    gateway a CLI is pointed at)."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)
