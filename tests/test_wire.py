"""The wire schema the CLIs get stays inside the subset both accept (schemas/wire.py),
and says the same as the validation schema except what only the runner can check."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import schemas
from schemas.wire import violations

WIRE = "worker-result.wire.json"
VALIDATION = "worker-result.schema.json"
#: What the validation schema may add to the wire one: identity, and the rules
#: outside the wire subset (completed needs empty blockers).
VALIDATION_ONLY = {"$schema", "$id", "title", "description", "if", "then"}


def test_the_shipped_wire_schema_is_inside_the_subset() -> None:
    assert violations(schemas.load(WIRE)) == []


def test_the_validation_schema_is_not_and_says_why() -> None:
    """Handing the validation schema to a CLI is the bug this file exists for."""
    found = violations(schemas.load(VALIDATION))
    for keyword in ("$schema", "$id", "if", "then"):
        assert f"#: keyword {keyword!r} is outside the wire subset" in found


def test_wire_and_validation_schemas_describe_the_same_document() -> None:
    wire = {k: v for k, v in schemas.load(WIRE).items() if k != "description"}
    validation = {k: v for k, v in schemas.load(VALIDATION).items() if k not in VALIDATION_ONLY}
    assert wire == validation


def test_the_rule_the_wire_cannot_carry_is_enforced_by_validation() -> None:
    answer = {"status": "completed", "summary": "done", "changed_files": [], "tests_run": [],
              "artifacts": [], "findings": [], "blockers": ["a blocker"]}
    assert schemas.first_error(VALIDATION, answer) == (
        "blockers: must contain less than or equal to 0 items")


def _leaf(**extra: Any) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": ["x"],
            "properties": {"x": {"type": "string", **extra}}}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: s.pop("additionalProperties"),
         "#: an object must be closed (additionalProperties: false)"),
        (lambda s: s.update(additionalProperties=True),
         "#: an object must be closed (additionalProperties: false)"),
        (lambda s: s.update(required=[]), "#: every property must be required, and only those"),
        (lambda s: s.update(required=["x", "y"]),
         "#: every property must be required, and only those"),
        (lambda s: s.update({"$schema": "http://json-schema.org/draft-07/schema#"}),
         "#: keyword '$schema' is outside the wire subset"),
        (lambda s: s.update(allOf=[]), "#: keyword 'allOf' is outside the wire subset"),
        (lambda s: s.update({"not": {}}), "#: keyword 'not' is outside the wire subset"),
        (lambda s: s["properties"]["x"].update(type=["string", "null"]),
         "#/properties/x: needs exactly one type, one of "
         "object, array, string, boolean, integer, number, null"),
        (lambda s: s["properties"]["x"].update(maxItems=0),
         "#/properties/x: keyword 'maxItems' is outside the wire subset"),
        (lambda s: s["properties"]["x"].update(items={"type": "string"}),
         "#/properties/x: 'items' needs type 'array', not 'string'"),
        (lambda s: s["properties"]["x"].update(enum=["a", 1]),
         "#/properties/x: enum value 1 is not of type string"),
        (lambda s: s["properties"].update(y={"type": "array"}),
         "#/properties/y: an array must say what its items are"),
        (lambda s: s.update(type="array"), "#: the root must be an object schema"),
    ],
)
def test_each_rule_of_the_subset(change: Any, expected: str) -> None:
    schema = copy.deepcopy(_leaf())
    assert violations(schema) == []
    change(schema)
    assert expected in violations(schema)


def test_any_of_is_checked_branch_by_branch() -> None:
    schema = _leaf()
    schema["properties"]["x"] = {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert violations(schema) == []
    schema["properties"]["x"]["anyOf"].append({"type": "object", "properties": {},
                                                "required": []})
    assert violations(schema) == [
        "#/properties/x/anyOf/2: an object must be closed (additionalProperties: false)"]
    assert violations({"anyOf": [_leaf()]})[:2] == [
        "#: the root must be an object schema", "#: the root cannot be an anyOf"]


def test_nested_objects_and_arrays_are_walked() -> None:
    schema = _leaf()
    schema["properties"]["x"] = {"type": "array", "items": {"type": "object", "properties": {
        "deep": {"type": "integer", "enum": [1, True]}}, "required": ["deep"],
        "additionalProperties": False}}
    assert violations(schema) == [
        "#/properties/x/items/properties/deep: enum value True is not of type integer"]


def test_the_review_wire_schema_is_inside_the_subset_and_matches_its_validation() -> None:
    wire = schemas.load("review-result.wire.json")
    assert violations(wire) == []
    validation = schemas.load("review-result.schema.json")
    assert {k: v for k, v in wire.items() if k != "description"} == {
        k: v for k, v in validation.items() if k not in VALIDATION_ONLY
    }
