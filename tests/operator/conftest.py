"""Prepared homes for the operator commands, on the daemon tests' real harness."""

from tests.harness import lane  # noqa: F401 - the fixture, exposed to this folder
