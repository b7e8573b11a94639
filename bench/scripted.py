"""The scripted model server as its users hold it: started in a network namespace of
its own, scripted per task, what the CLIs sent it read back (tests/realrun, the waste
figure). The server itself is ``modelserver.py``."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import gateway, netns

SERVER = Path(gateway.__file__).with_name("modelserver.py")
#: How long the server may take to listen.
START_TIMEOUT = 30.0


class ServerDidNotStart(RuntimeError):
    """The server exited, or did not listen in time; the message holds what it said."""


@dataclass
class ModelServer:
    """The scripted server, its script and what the CLIs sent it."""

    root: Path
    process: subprocess.Popen[bytes] = field(init=False)
    port: int = field(init=False)

    @property
    def script_file(self) -> Path:
        return self.root / "script.json"

    @property
    def log_file(self) -> Path:
        return self.root / "requests.jsonl"

    def start(self) -> None:
        self.script_file.write_text(json.dumps({"tasks": {}}))
        ready = self.root / "port"
        argv = [sys.executable, str(SERVER), "--script", str(self.script_file),
                "--log", str(self.log_file), "--ready", str(ready), "--loopback-up"]
        output = (self.root / "server.out").open("wb")
        self.process = subprocess.Popen(netns.isolated(argv), stdout=output, stderr=output)
        deadline = time.monotonic() + START_TIMEOUT
        while not ready.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                said = (self.root / "server.out").read_text(errors="replace")
                raise ServerDidNotStart(f"the scripted model server did not start: {said}")
            time.sleep(0.05)
        self.port = int(ready.read_text())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def script(self, marker: str, **providers: list[dict[str, Any]]) -> None:
        """Give ``marker``'s task its steps per provider (``codex=[...]``, ``claude=[...]``)."""
        self.script_many({marker: providers})

    def script_many(self, tasks: dict[str, dict[str, list[dict[str, Any]]]]) -> None:
        """Give each task of ``tasks`` (by marker) its steps per provider, in one write."""
        document = json.loads(self.script_file.read_text())
        document["tasks"].update(tasks)
        temporary = self.script_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(document))
        temporary.replace(self.script_file)

    def requests(
        self, marker: str | None = None, provider: str | None = None
    ) -> list[dict[str, Any]]:
        if not self.log_file.exists():
            return []
        lines = self.log_file.read_text().split("\n")[:-1]  # the last may be half written
        entries = [json.loads(line) for line in lines if line]
        return [e for e in entries if (marker is None or e["marker"] == marker)
                and (provider is None or e["provider"] == provider)]

    def join(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the server's network namespace."""
        return netns.joined(self.process.pid, argv)

    def base_url(self, provider: str) -> str:
        return gateway.base_url(self.port, provider)
