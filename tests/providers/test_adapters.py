"""The provider registry and the contract every adapter keeps (issue 29): what the rest of
the runner asks of a CLI, asked of each registered adapter, so a third CLI's adapter is
held to the same by these tests and its own contract tests (``tests/contract``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lane_runner import config, names
from lane_runner.providers import ADAPTERS, NAMES, Attempt, Classification, adapter
from tests.providers.conftest import RequestFactory


def test_the_registry_is_keyed_by_each_adapters_name() -> None:
    assert NAMES == tuple(ADAPTERS) == names.PROVIDERS
    assert all(adapter(name).name == name for name in NAMES)
    with pytest.raises(ValueError, match="unknown provider 'aider': expected one of codex"):
        adapter("aider")


@pytest.mark.parametrize("name", NAMES)
def test_each_adapter_has_its_keys_lanes_and_defaults(name: str, tmp_path: Path) -> None:
    cli = adapter(name)
    cfg = config.load(tmp_path, {})
    assert config.cli_models(cfg, name) == dict(cli.default_models)
    assert config.cli_binary(cfg, name) is None and config.cli_cap(cfg, name) == 0
    assert config.cli_environment(cfg, name) == {}
    assert (f"{name}_config" in config.KEYS_BY_NAME) == cli.takes_config
    assert names.parse_lane(f"cli-{name}-low") == names.Lane(name, "low")
    assert all(model.startswith(cli.model_prefix) for model in cli.default_models.values())


FIXTURES = Path(__file__).parent / "fixtures" / "real-cli"


@pytest.mark.parametrize("name", NAMES)
def test_each_adapter_speaks_its_own_events_and_no_others(name: str) -> None:
    """Every event a real CLI printed (the captured outputs) is its adapter's to describe,
    and no other adapter claims it: ``lane-runner logs`` attributes each line to one CLI."""
    events = [
        json.loads(line)
        for captured in sorted(FIXTURES.glob(f"{name}-*.stdout"))
        for line in captured.read_text().splitlines()
        if line.startswith("{")
    ]
    assert events, f"no captured output of {name} in {FIXTURES}"
    for event in events:
        assert [cli.name for cli in ADAPTERS.values() if cli.speaks(event)] == [name], event


def _started(name: str, req_resume: bool, first: Classification, make_request: RequestFactory,
             whole_prompt: str | None = None) -> list[tuple[list[str], Path | None, str | None]]:
    """The starts ``name``'s adapter makes when its first start ends as ``first``, each with
    the prompt it was given (None: the request's own)."""
    req = make_request(name, session_id="0199a213-81c0-7800-8aa1-bbab2a035a53",
                       resume=req_resume)
    req.prompt, req.whole_prompt = "## Continue\nonly what is new", whole_prompt
    starts: list[tuple[list[str], Path | None, str | None]] = []

    def run_once(argv: list[str], result_file: Path | None, prompt: str | None = None
                 ) -> Attempt:
        starts.append((argv, result_file, prompt))
        verdict = first if len(starts) == 1 else Classification.OK
        return Attempt(verdict, "", None, 0, None, None, "")

    adapter(name).attempt(req, run_once)
    return starts


def _starts(name: str, req_resume: bool, first: Classification,
            make_request: RequestFactory) -> list[tuple[list[str], Path | None]]:
    return [(argv, result) for argv, result, _ in _started(name, req_resume, first, make_request)]


@pytest.mark.parametrize("name", NAMES)
def test_a_fresh_session_after_a_lost_one_is_given_the_whole_prompt(
    name: str, make_request: RequestFactory
) -> None:
    """A resumed turn is told only what is new; when its session is gone, the fresh one
    the adapter starts instead is told everything (``whole_prompt``): the task, the rules."""
    whole = "# Task b/t-1: the whole task\n\nOperating rules: ..."
    [(_, _, resumed), (_, _, fresh)] = _started(
        name, True, Classification.SESSION_MISSING, make_request, whole
    )
    assert resumed is None or "the whole task" not in resumed  # the request's own prompt
    assert fresh is not None and fresh.startswith(whole)
    # A session that is only taken (claude's reserved id in use) already holds the task.
    collided = _started(name, False, Classification.SESSION_COLLISION, make_request, whole)
    assert all(prompt is None or "the whole task" not in prompt for _, _, prompt in collided)


def test_an_unknown_codex_thread_is_replaced_by_a_fresh_one(
    make_request: RequestFactory,
) -> None:
    [(resumed, first_file), (fresh, second_file)] = _starts(
        "codex", True, Classification.SESSION_MISSING, make_request
    )
    assert "resume" in resumed and "resume" not in fresh
    assert first_file is not None and second_file is not None and first_file != second_file


def test_claude_resumes_a_reserved_id_already_in_use_and_restarts_a_missing_one(
    make_request: RequestFactory,
) -> None:
    [(fresh, _), (resumed, _)] = _starts(
        "claude", False, Classification.SESSION_COLLISION, make_request
    )
    assert "--session-id" in fresh and "--resume" in resumed
    [(resumed, _), (fresh, _)] = _starts(
        "claude", True, Classification.SESSION_MISSING, make_request
    )
    assert "--resume" in resumed and "--session-id" in fresh
    assert len(_starts("claude", False, Classification.CAPACITY, make_request)) == 1


def test_the_lane_state_keeps_a_session_for_each_provider() -> None:
    """The lane state's schema lists the providers whose sessions it keeps: a CLI missing
    there has its session refused on save, and a restarted task starts it afresh."""
    schema = json.loads((Path(__file__).parents[2] / "schemas" / "lane-state.schema.json")
                        .read_text())
    for table in ("sessions", "started", "told"):
        assert set(schema["properties"][table]["properties"]) == set(NAMES), table
