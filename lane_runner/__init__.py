"""lane-runner: run coding tasks from a board through agent CLIs, durably."""

__version__ = "0.1.0"
