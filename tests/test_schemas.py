"""The compiled validators agree with jsonschema, the reference implementation.

The product validates with fastjsonschema (compiled, ~15× faster on the
journal's hot path); these properties hold it to what the schemas say under
JSON Schema 2020-12, on valid documents and on documents a few random edits
away from valid, which is where two validators would disagree.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import jsonschema
import referencing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schemas
from journal.record import State, TerminalRecord
from lane_runner.run.lanestate import LaneState

RESULT: dict[str, Any] = {
    "status": "completed",
    "summary": "done",
    "changed_files": ["a.py"],
    "tests_run": ["pytest"],
    "artifacts": [],
    "findings": ["a risk"],
    "blockers": [],
}


def _terminal(state: State) -> dict[str, Any]:
    record = TerminalRecord("work", "t-1", 3, dict(RESULT), "summary", {"route": "codex"})
    by_state = {
        State.PENDING: record,
        State.PREPARED: record.as_prepared(),
        State.COMMITTED: record.as_committed(),
        State.CONFLICT: record.as_conflict("stale"),
    }
    return by_state[state].document()


def _lane_state() -> dict[str, Any]:
    state = LaneState("work", "t-1", 3, route={"provider": "codex"}, provider="codex")
    state.sessions["codex"] = "0199-session"
    state.attempts.append(
        {"n": 1, "provider": "codex", "model": "gpt", "effort": "low", "started_at": 1.5}
    )
    return state.to_document()


DIAGNOSTIC: dict[str, Any] = {
    "format": 1,
    "board": "work",
    "original_name": "t-1.run-3.terminal.pending.json",
    "reason": "schema-invalid",
    "kind": "regular",
    "size": 12,
    "inode": "801-1f",
    "sha256": "0" * 64,
    "hashed_bytes": 12,
    "hash_complete": True,
    "recorded_at": "2026-11-30T00:00:00+00:00",
    "disposition": "retire",
    "task_id": "t-1",
    "run_id": 3,
}

SEEDS: dict[str, list[dict[str, Any]]] = {
    "terminal-record.schema.json": [_terminal(state) for state in State],
    "worker-result.schema.json": [RESULT, {**RESULT, "status": "blocked", "blockers": ["x"]}],
    "lane-state.schema.json": [_lane_state()],
    "quarantine-diagnostic.schema.json": [DIAGNOSTIC, {**DIAGNOSTIC, "sha256": None}],
}

#: Values that sit on the schemas' edges: enum members, names, digests, bounds.
EDGES = st.sampled_from(
    [
        *[str(state) for state in State],
        "completed",
        "incomplete",
        "blocked",
        "regular",
        "retire",
        ".",
        "..",
        "t-1\n",
        "a/b",
        "0" * 64,
        "f" * 63,
        0,
        1,
        -1,
        1.0,
        65537,
        True,
        [],
        {},
    ]
)
SCALARS = st.none() | st.booleans() | st.integers(-2, 2) | st.floats(-2, 2) | st.text(max_size=4)
JSON = st.recursive(
    SCALARS | EDGES,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=5,
)


def _containers(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(node, dict):
        children = list(node.items())
    elif isinstance(node, list):
        children = list(enumerate(node))
    else:
        return []
    found = [path]
    for key, child in children:
        found += _containers(child, (*path, key))
    return found


def _at(node: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        node = node[key]
    return node


@st.composite
def near_valid(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """A valid seed with zero to three random edits: drop, replace or add a member."""
    document = copy.deepcopy(draw(st.sampled_from(SEEDS[name])))
    for _ in range(draw(st.integers(0, 3))):
        target = _at(document, draw(st.sampled_from(_containers(document))))
        keys = list(target) if isinstance(target, dict) else list(range(len(target)))
        action = draw(st.sampled_from(["drop", "replace", "add"]))
        if action == "drop" and keys:
            del target[draw(st.sampled_from(keys))]
        elif action == "replace" and keys:
            target[draw(st.sampled_from(keys))] = copy.deepcopy(draw(JSON))
        elif isinstance(target, dict):
            key = draw(st.text(max_size=12) | st.sampled_from(["prepared_at", "extra"]))
            target[key] = copy.deepcopy(draw(JSON))
        else:
            target.append(copy.deepcopy(draw(JSON)))
    return document


def _ecma_pattern(
    validator: Any, pattern: str, instance: Any, schema: Any
) -> Iterator[jsonschema.ValidationError]:
    """``pattern`` as JSON Schema's dialect (ECMA-262) reads it: its final ``$`` matches at
    the very end only, where Python's ``re`` also matches before a final newline
    (jsonschema's own ``pattern`` took ``"0\\n"`` for ``^[A-Za-z0-9_.-]+$``)."""
    ends = pattern.endswith("$") and not pattern.endswith(r"\$")
    anchored = pattern[:-1] + r"\Z" if ends else pattern
    if validator.is_type(instance, "string") and not re.search(anchored, instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


_ECMA_VALIDATOR = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"pattern": _ecma_pattern}
)


def _reference(name: str) -> Any:
    """jsonschema over the schema files as shipped, sibling ``$ref``s through a registry,
    its ``pattern`` read as the schemas' dialect reads it (``_ecma_pattern``)."""
    documents = [schemas.load(each) for each in schemas.names()]
    registry: referencing.Registry[Any] = referencing.Registry().with_resources(
        (document["$id"], referencing.Resource.from_contents(document)) for document in documents
    )
    return _ECMA_VALIDATOR(schemas.load(name), registry=registry)


def test_every_schema_is_a_valid_2020_12_schema() -> None:
    for name in schemas.names():
        jsonschema.Draft202012Validator.check_schema(schemas.load(name))


def test_every_seed_is_valid() -> None:
    for name, seeds in SEEDS.items():
        for seed in seeds:
            assert schemas.first_error(name, seed) is None, (name, seed)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_compiled_validators_agree_with_the_reference(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(SEEDS)))
    document = data.draw(near_valid(name))
    error = schemas.first_error(name, document)
    assert (error is None) == _reference(name).is_valid(document), (name, document, error)


def test_a_pattern_s_end_is_the_strings_end_for_both() -> None:
    """The case hypothesis found: a board named ``0`` and a newline."""
    seed = copy.deepcopy(SEEDS["quarantine-diagnostic.schema.json"][0])
    seed["board"] = "0\n"
    assert schemas.first_error("quarantine-diagnostic.schema.json", seed) is not None
    assert not _reference("quarantine-diagnostic.schema.json").is_valid(seed)


def test_an_error_names_where_and_what() -> None:
    document = {**RESULT, "blockers": ["x"]}
    assert schemas.first_error("worker-result.schema.json", document) == (
        "blockers: must contain less than or equal to 0 items"
    )
    assert schemas.first_error("worker-result.schema.json", {**RESULT, "status": 1}) == (
        "status: must be string"
    )
