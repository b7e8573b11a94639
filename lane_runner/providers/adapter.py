"""The ``Provider`` protocol: everything the runner knows of one coding-agent CLI.

Each CLI has one adapter module (``codex.py``, ``claude.py``) holding an instance
of a ``CLIAdapter`` subclass; ``registry.py`` keys them by name. The rest of the
runner iterates the registry and asks the adapter, so it never compares provider
names: a third CLI is one new module and its contract tests.

``Provider`` declares each operation once, with the default a CLI that lacks it gets
(no tool clock, no result file, no root refusal, its vendor's API). ``CLIAdapter``
subclasses it and writes the shared parts once (the session fallbacks driven by a
table, the reserved session id); a subclass says the rest with a few class
attributes and, once each, the methods only its CLI has (argv, event folding, login).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from lane_runner.providers.model import Attempt, Classification, ProviderRequest
from lane_runner.providers.reading import Reading


class RunOnce(Protocol):
    """Runs one argv under the supervisor: the argv, the result file the CLI writes its
    answer to (None: the answer arrives on the event stream only), and what it gets on
    stdin (None: the request's prompt; a repair turn sends only its own words)."""

    def __call__(
        self, argv: list[str], result_file: Path | None, prompt: str | None = None
    ) -> Attempt: ...


#: Runs a short command (a login check) as the worker would: what it said first, its
#: exit status (None: it did not end in time or could not start).
RunCommand = Callable[[list[str]], tuple[str, int | None]]


@dataclass(frozen=True)
class Login:
    """Whether a CLI is logged in as the user it runs as, in words for ``doctor``."""

    logged_in: bool
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class RunsAs:
    """The user a CLI runs as (None: the runner's own) and the ``HOME`` it gets."""

    user: str | None
    home: Path

    def sudo(self, command: str) -> str:
        """``command`` as that user would type it (``sudo -u USER -H`` in front when needed)."""
        return f"sudo -u {self.user} -H {command}" if self.user else command

    def who(self) -> str:
        return f"the worker user {self.user}" if self.user else "the user the daemon runs as"


class Provider(Protocol):
    """One CLI as the runner sees it (docs/ARCHITECTURE.md §2, ``providers``)."""

    @property
    def name(self) -> str:
        """The provider's name: lanes (``cli-<name>-<effort>``), routes, config keys."""

    @property
    def command(self) -> str:
        """The CLI's program name, looked for on ``PATH`` unless ``<name>_bin`` says."""

    @property
    def version_identity(self) -> re.Pattern[str]:
        """What the real CLI's ``--version`` says of itself."""

    @property
    def env_prefixes(self) -> tuple[str, ...]:
        """Variables (names or prefixes) of the runner's environment the CLI may get."""

    @property
    def model_prefix(self) -> str:
        """How the vendor's model names begin (a body naming another vendor's loses)."""

    @property
    def default_models(self) -> Mapping[str, str]:
        """The static policy's model per effort unless ``<name>_models`` says."""

    def knows_model(self, model: str) -> bool:
        """Whether this CLI runs ``model`` (its model flag takes it): its vendor's names,
        for a task that pins its model (issue 42)."""
        return model.startswith(self.model_prefix)

    @property
    def takes_config(self) -> bool:
        """Whether the CLI takes its own settings from the runner (``<name>_config``)."""

    @property
    def config_help(self) -> str:
        """What ``<name>_config`` holds, for ``config show`` (when ``takes_config``)."""

    @property
    def env_help(self) -> str:
        """What ``<name>_env`` is for, for ``config show``."""

    @property
    def sandbox_modes(self) -> tuple[str, ...]:
        """The CLI's own sandbox modes the runner offers (``<name>_sandbox``), the default
        first; empty: the CLI has none the runner can choose (docs/security.md)."""

    @property
    def sandbox_help(self) -> str:
        """What ``<name>_sandbox`` chooses, for ``config show`` (when ``sandbox_modes``)."""

    @property
    def denies_by(self) -> str:
        """How this CLI is given the runner's deny list (``denied.py``), in words for
        docs and ``doctor``; empty: it has no way to deny a command."""

    @property
    def writes_result_file(self) -> bool:
        """Whether the CLI writes its final answer to a file (codex ``-o``)."""

    @property
    def failure_texts(self) -> Mapping[Classification, tuple[str, ...]]:
        """What only this CLI says when an attempt fails, by what it means: regular
        expressions (case-insensitive, ``^`` at a line's start) ``classify`` adds to the
        words every CLI shares (docs/ARCHITECTURE.md §7)."""

    @property
    def noise_texts(self) -> tuple[str, ...]:
        """Error events of this CLI that say nothing about the outcome yet (chatter)."""

    @property
    def gave_up_texts(self) -> tuple[str, ...]:
        """This CLI's word that it has given up while it keeps running."""

    @property
    def egress_hosts(self) -> tuple[str, ...]:
        """The hosts the CLI's own service answers on (its model API, its login): what a
        sandboxed attempt may reach besides the configured gateway (docs/security.md)."""

    def config_settings(self, table: Mapping[str, Any]) -> dict[str, Any]:
        """``<name>_config`` checked and flattened; ValueError names what is wrong. A CLI
        that takes no settings from the runner refuses any."""
        if table:
            raise ValueError(f"{self.name} takes its settings from its environment")
        return {}

    def writable_homes(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        """Where the CLI keeps what outlives an attempt (sessions, logins) for a worker
        with ``env``: writable in its sandbox, and nothing else of the worker's home."""
        ...

    def settled_files(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        """What in those homes says what the CLI runs (its configuration, hooks, rules):
        read-only in a sandbox, so no task can plant a command for the next one."""
        ...

    def argv(
        self, req: ProviderRequest, *, resume: bool, result_file: Path, schema: str
    ) -> list[str]:
        """The command line of one start (``resume``: of the session ``req`` names);
        ``schema``: the wire schema's text, for a CLI that takes it inline."""
        ...

    def observe(self, reading: Reading, event: dict[str, Any]) -> bool:
        """Fold one event into ``reading``; True when it is meaningful progress."""
        ...

    def track_tools(self, tools: set[str], event: dict[str, Any]) -> None:
        """Keep ``tools`` the ids of the CLI's tool calls that have begun and not ended:
        while one is in flight the CLI may print nothing for as long as the tool runs, and
        the supervisor's stall limit is ``tool_stall_timeout`` (docs/ARCHITECTURE.md §6).
        A CLI that says nothing of its tool calls is never on the tool clock."""
        return None

    def file_result(self, result_file: Path) -> dict[str, Any] | None:
        """The answer the CLI wrote to ``result_file``, if any (a CLI that writes none: None)."""
        return None

    def observe_stderr(self, reading: Reading, line: str) -> None:
        """Fold one line the CLI wrote on stderr into ``reading``: for a CLI whose only word
        of a failing model API is a log line there while it retries for ever (opencode)."""
        return None

    def run_env(self, req: ProviderRequest) -> dict[str, str]:
        """Variables the runner sets for each start of this CLI on top of ``req.env`` (its
        posture: the deny list, no self-update); empty for a CLI told by its argv."""
        return {}

    def attempt(self, req: ProviderRequest, run_once: RunOnce) -> Attempt:
        """One attempt with the CLI's session fallbacks (an unknown or taken session)."""
        ...

    def new_session(self) -> str | None:
        """A session id to reserve before the first start, or None: the CLI names it."""
        ...

    def root_refusal(
        self,
        run_as: str | None,
        euid: int | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> str | None:
        """Why the CLI cannot start here as root, or None (a CLI that never refuses)."""
        return None

    def gateway(
        self, settings: Mapping[str, Any], env: Mapping[str, str]
    ) -> tuple[str | None, list[str]]:
        """Where the CLI sends its model requests, and what would stop it (None and
        nothing: its vendor's own API, as the CLI is configured by default)."""
        return None, []

    def login(
        self, executable: Path, runs: RunsAs, env: Mapping[str, str], run: RunCommand
    ) -> Login:
        """Whether the CLI is logged in as ``runs`` with the worker environment ``env``."""
        ...

    def settings_file(self) -> str | None:
        """The settings file every run of this CLI gets (claude ``--settings``), or None."""
        return None

    def prepare(self, req: ProviderRequest) -> None:
        """Put in place what the CLI reads before it starts for ``req`` (codex: the deny
        list as a rules file in its home); OSError when it cannot. A CLI that reads
        nothing the runner writes for it needs nothing here."""
        return None

    def speaks(self, event: dict[str, Any]) -> bool:
        """Whether ``event`` (a line of a task log) is one of this CLI's events."""
        ...

    def describe(self, event: dict[str, Any]) -> str | None:
        """One of this CLI's events for people (``lane-runner logs``); None: it says nothing."""
        ...


class CLIAdapter(Provider):
    """The parts of ``Provider`` every CLI shares; subclasses set the class attributes
    and write what only their CLI has. Each operation is declared once, in ``Provider``
    (with its default where a CLI may lack it); an adapter that leaves out one without
    a default cannot be made (``mypy --strict``: an abstract class)."""

    name: ClassVar[str]
    command: ClassVar[str]
    version_identity: ClassVar[re.Pattern[str]]
    env_prefixes: ClassVar[tuple[str, ...]]
    model_prefix: ClassVar[str]
    default_models: ClassVar[Mapping[str, str]]
    takes_config: ClassVar[bool] = False
    config_help: ClassVar[str] = ""
    env_help: ClassVar[str]
    sandbox_modes: ClassVar[tuple[str, ...]] = ()
    sandbox_help: ClassVar[str] = ""
    denies_by: ClassVar[str] = ""
    writes_result_file: ClassVar[bool] = False
    reserves_session: ClassVar[bool] = False
    """The runner names the session before the first start (claude ``--session-id``)."""
    inline_schema: ClassVar[bool] = False
    """The CLI takes the wire schema's text on its command line (claude ``--json-schema``)."""
    session_fallbacks: ClassVar[Mapping[tuple[bool, Classification], bool]] = {}
    """(resumed, classification of that start) -> resume on the one more start it gets."""
    failure_texts: ClassVar[Mapping[Classification, tuple[str, ...]]] = {}
    noise_texts: ClassVar[tuple[str, ...]] = ()
    gave_up_texts: ClassVar[tuple[str, ...]] = ()
    egress_hosts: ClassVar[tuple[str, ...]] = ()

    def writable_homes(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        return ()

    def settled_files(self, env: Mapping[str, str]) -> tuple[Path, ...]:
        return ()

    def new_session(self) -> str | None:
        return str(uuid.uuid4()) if self.reserves_session else None

    def attempt(self, req: ProviderRequest, run_once: RunOnce) -> Attempt:
        """The first start as ``req`` asks, then at most one more as ``session_fallbacks``
        says: the fallbacks are a property of the CLI, not of the daemon."""
        if self.reserves_session and not req.session_id:
            raise ValueError(
                f"{self.name} needs a reserved session id, persisted before the first start"
            )
        schema = req.schema_path.read_text(encoding="utf-8") if self.inline_schema else ""
        resume = req.resume and bool(req.session_id)
        first = req.result_file
        attempt = run_once(self._argv(req, resume, first, schema), self._answer_file(first))
        then = self.session_fallbacks.get((resume, attempt.classification))
        if then is not None:
            retry = req.retry_result_file or _sibling(req.result_file, "fresh")
            # A session lost on resume took what was new with it: the fresh one is told all.
            prompt = req.whole_prompt if resume and not then else None
            attempt = run_once(
                self._argv(req, then, retry, schema), self._answer_file(retry), prompt
            )
        if attempt.session_id is None and self.reserves_session:
            attempt.session_id = req.session_id
        return attempt

    def _argv(
        self, req: ProviderRequest, resume: bool, result_file: Path, schema: str
    ) -> list[str]:
        return self.argv(req, resume=resume, result_file=result_file, schema=schema)

    def _answer_file(self, result_file: Path) -> Path | None:
        return result_file if self.writes_result_file else None


def _sibling(path: Path, label: str) -> Path:
    """A result file beside ``path`` for the one more start: no file is written twice."""
    stem, dot, _ = path.name.partition(".result.json")
    name = f"{stem}.{label}.result.json" if dot else f"{path.name}.{label}"
    return path.with_name(name)


#: How wide a described event may be (``lane-runner logs``).
DESCRIBED_WIDTH = 200


def shortened(text: object, width: int = DESCRIBED_WIDTH) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def mapping(value: object) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}
