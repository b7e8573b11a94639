"""Codex and Claude Code adapters and the process supervisor that runs them.

``run_attempt(ProviderRequest) -> Attempt`` is the whole interface the daemon
needs; ``worker_environment`` builds the allow-listed env and
``claude_root_refusal`` says up front when a claude lane cannot run here;
``user_ids`` starts any other process as the worker user.
"""

from lane_runner.providers.claude import root_refusal as claude_root_refusal
from lane_runner.providers.environment import worker_environment
from lane_runner.providers.model import Attempt, Classification, Progress, ProviderRequest
from lane_runner.providers.run import run_attempt
from lane_runner.providers.supervisor import user_ids
from lane_runner.providers.usage import LimitNotice, UsageReport

__all__ = [
    "Attempt",
    "Classification",
    "LimitNotice",
    "Progress",
    "ProviderRequest",
    "UsageReport",
    "claude_root_refusal",
    "run_attempt",
    "user_ids",
    "worker_environment",
]
