"""Codex and Claude Code adapters and the process supervisor that runs them.

``run_attempt(ProviderRequest) -> Attempt`` is the whole interface the daemon
needs; ``ADAPTERS`` (``registry.py``) holds one ``Provider`` per CLI, which the rest
of the runner asks whatever it must know of a CLI (its config keys, its root
refusal, its argv for a dry run); ``worker_environment`` builds the allow-listed
env; ``user_ids`` starts any other process as the worker user.
"""

from lane_runner.providers.adapter import Login, Provider, RunsAs
from lane_runner.providers.environment import worker_environment
from lane_runner.providers.model import Attempt, Classification, Progress, ProviderRequest
from lane_runner.providers.proctree import user_ids
from lane_runner.providers.reading import REVIEW_ANSWER, WORKER_ANSWER, AnswerShape
from lane_runner.providers.registry import ADAPTERS, NAMES, adapter
from lane_runner.providers.run import run_attempt
from lane_runner.providers.usage import LimitNotice, UsageReport

__all__ = [
    "ADAPTERS",
    "NAMES",
    "REVIEW_ANSWER",
    "WORKER_ANSWER",
    "AnswerShape",
    "Attempt",
    "Classification",
    "LimitNotice",
    "Login",
    "Progress",
    "Provider",
    "ProviderRequest",
    "UsageReport",
    "RunsAs",
    "adapter",
    "run_attempt",
    "user_ids",
    "worker_environment",
]
