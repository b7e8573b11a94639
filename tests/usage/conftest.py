"""The usage tests' daemon runs use the shared harness (tests/harness.py)."""

from tests.harness import lane  # noqa: F401 - the fixture, exposed to this folder
