"""JSON Schemas of every document that crosses a boundary, shipped in the wheel.

Schemas are loaded from package data (not from the source tree), so a plain
``pip install .`` finds them. ``validator(name)`` compiles the schema, with every
``$ref`` to a sibling file inlined, into a Python function (fastjsonschema): the
journal validates every record it commits or recovers, and the interpreting
validator (jsonschema) cost more there than the fsyncs did. The test suite holds
the compiled validators against jsonschema, the reference implementation.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from importlib import resources
from typing import Any

import fastjsonschema
import orjson


def names() -> list[str]:
    """The file names of every shipped schema."""
    return sorted(
        entry.name
        for entry in resources.files(__name__).iterdir()
        if entry.name.endswith(".schema.json")
    )


@functools.cache
def load(name: str) -> dict[str, Any]:
    """The schema document called ``name`` (e.g. ``"worker-result.schema.json"``)."""
    document: dict[str, Any] = orjson.loads(resources.files(__name__).joinpath(name).read_bytes())
    return document


def load_bytes(name: str) -> bytes:
    """The schema file's exact bytes, for handing to a CLI as a file."""
    return resources.files(__name__).joinpath(name).read_bytes()


def _inlined(node: Any) -> Any:
    """``node`` with every ``{"$ref": "<sibling>.schema.json"}`` replaced by that schema."""
    if isinstance(node, list):
        return [_inlined(item) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.endswith(".schema.json"):
        target = {k: v for k, v in _inlined(load(ref)).items() if k not in ("$id", "$schema")}
        rest = {k: _inlined(v) for k, v in node.items() if k != "$ref"}
        return {**rest, "allOf": [target]} if rest else target
    return {key: _inlined(value) for key, value in node.items()}


@functools.cache
def validator(name: str) -> Callable[[object], object]:
    """The named schema compiled to a function that raises on the first error."""
    return fastjsonschema.compile(_inlined(load(name)))


def first_error(name: str, document: object) -> str | None:
    """The first validation error as one line, or None when ``document`` is valid."""
    try:
        validator(name)(document)
    except fastjsonschema.JsonSchemaValueException as error:
        where = "/".join(str(part) for part in error.path[1:]) or "(root)"
        what = error.message.removeprefix(error.name or "").strip()
        return f"{where}: {what}"
    return None
