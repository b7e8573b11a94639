"""A task's provider log, rendered for people (``lane-runner logs``).

The log holds the CLIs' JSONL events as they came, ``[stderr]`` lines and the
runner's own timestamped notes. Each line becomes one readable line; tool
calls are summarised to their command or path; lines that are not events pass
through unchanged. Pure: text in, text out.
"""

from __future__ import annotations

import orjson

from lane_runner.providers import ADAPTERS
from lane_runner.providers.adapter import shortened


def render(line: str) -> str | None:
    """One log line for people; None for events that say nothing (turn/step markers).

    Each CLI's adapter describes its own events (``Provider.describe``); an event no
    adapter speaks is shown as its JSON, shortened.
    """
    if not line.startswith("{"):
        return line
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        return line
    if not isinstance(event, dict):
        return line
    for cli in ADAPTERS.values():
        if cli.speaks(event):
            return cli.describe(event)
    return shortened(orjson.dumps(event).decode())
