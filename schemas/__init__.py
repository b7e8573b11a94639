"""JSON Schemas of every document that crosses a boundary, shipped in the wheel.

Schemas are loaded from package data (not from the source tree), so a plain
``pip install .`` finds them. ``validator(name)`` returns a cached validator
with every sibling schema registered, so ``$ref`` between them resolves offline.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import orjson
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

_BASE = "https://lane-runner.dev/schemas/"


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


@functools.cache
def _registry() -> Registry:
    resources_ = [(_BASE + name, Resource.from_contents(load(name))) for name in names()]
    return Registry().with_resources(resources_)


@functools.cache
def validator(name: str) -> Draft202012Validator:
    """A compiled validator for the named schema, with sibling ``$ref``s resolvable."""
    return Draft202012Validator(load(name), registry=_registry())


def first_error(name: str, document: object) -> str | None:
    """The first validation error as one line, or None when ``document`` is valid."""
    error = next(iter(validator(name).iter_errors(document)), None)
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return f"{where}: {error.message}"
