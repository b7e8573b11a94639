"""The wire subset: what a schema handed to both provider CLIs may say.

Claude Code validates ``--json-schema`` with a draft-07 validator in strict
mode: it knows no ``$schema`` 2020-12, rejects unknown keywords and warns when
a type-specific keyword stands without its ``type``. Codex turns
``--output-schema`` into an OpenAI strict structured output: every object
closed (``additionalProperties: false``) with all its properties required, and
no ``if``/``then``/``else``, ``allOf``, ``not``, ``$id`` or ``$schema``. The
subset below is the intersection the runner needs, kept small on purpose:

- keywords: ``type``, ``description``, ``properties``, ``required``,
  ``additionalProperties``, ``items``, ``enum``, ``anyOf``;
- every schema names exactly one ``type`` (a string, not a list), except an
  ``anyOf`` whose branches each do; the root is an object;
- every object lists ``properties``, requires all of them and is closed;
- every array says what its ``items`` are; ``enum`` values match the type.

Rules the subset cannot express (``completed`` needs empty ``blockers``) live
in the validation schema and are checked by the runner once the answer is in.
``violations`` is pure: the tests hold every shipped wire schema to it.
"""

from __future__ import annotations

from typing import Any

KEYWORDS = frozenset(
    {"type", "description", "properties", "required", "additionalProperties", "items",
     "enum", "anyOf"}
)
TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict, "array": list, "string": str, "boolean": bool, "integer": int,
    "number": (int, float), "null": type(None),
}


def violations(schema: object) -> list[str]:
    """Every way ``schema`` leaves the wire subset, one line each; empty when inside."""
    found = _node(schema, "#")
    if isinstance(schema, dict) and schema.get("type") != "object":
        found.insert(0, "#: the root must be an object schema")
    return found


def _node(schema: object, where: str) -> list[str]:
    if not isinstance(schema, dict):
        return [f"{where}: a schema must be a JSON object"]
    found = [f"{where}: keyword {key!r} is outside the wire subset"
             for key in sorted(set(schema) - KEYWORDS)]
    if "anyOf" in schema:
        return found + _any_of(schema, where)
    kind = schema.get("type")
    if not isinstance(kind, str) or kind not in TYPES:
        return [*found, f"{where}: needs exactly one type, one of {', '.join(TYPES)}"]
    found += _misplaced(schema, kind, where)
    if kind == "object":
        found += _object(schema, where)
    elif kind == "array":
        found += _node(schema.get("items"), f"{where}/items") if "items" in schema else [
            f"{where}: an array must say what its items are"]
    if "enum" in schema:
        found += _enum(schema["enum"], kind, where)
    return found


def _misplaced(schema: dict[str, Any], kind: str, where: str) -> list[str]:
    """Type-specific keywords under another type (draft-07 strict mode's strictTypes)."""
    owners = {"properties": "object", "required": "object", "additionalProperties": "object",
              "items": "array"}
    return [f"{where}: {key!r} needs type {owner!r}, not {kind!r}"
            for key, owner in owners.items() if key in schema and owner != kind]


def _object(schema: dict[str, Any], where: str) -> list[str]:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return [f"{where}: an object must list its properties"]
    found = []
    if schema.get("additionalProperties") is not False:
        found.append(f"{where}: an object must be closed (additionalProperties: false)")
    required = schema.get("required")
    if not isinstance(required, list) or sorted(map(str, required)) != sorted(properties):
        found.append(f"{where}: every property must be required, and only those")
    for name, child in properties.items():
        found += _node(child, f"{where}/properties/{name}")
    return found


def _any_of(schema: dict[str, Any], where: str) -> list[str]:
    branches = schema["anyOf"]
    if where == "#":
        return ["#: the root cannot be an anyOf"]
    if not isinstance(branches, list) or not branches:
        return [f"{where}: anyOf must be a non-empty list of schemas"]
    extra = sorted(set(schema) - {"anyOf", "description"})
    found = [f"{where}: anyOf stands alone, not beside {', '.join(extra)}"] if extra else []
    for index, branch in enumerate(branches):
        found += _node(branch, f"{where}/anyOf/{index}")
    return found


def _enum(values: object, kind: str, where: str) -> list[str]:
    if not isinstance(values, list) or not values:
        return [f"{where}: enum must be a non-empty list"]
    expected = TYPES[kind]
    wrong = [value for value in values
             if not isinstance(value, expected) or (kind != "boolean" and isinstance(value, bool))]
    return [f"{where}: enum value {value!r} is not of type {kind}" for value in wrong]
