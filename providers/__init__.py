"""Codex and Claude Code adapters and the process supervisor that runs them.

``run_attempt(ProviderRequest) -> Attempt`` is the whole interface the daemon
needs; ``worker_environment`` builds the allow-listed env and
``claude_root_refusal`` says up front when a claude lane cannot run here;
``user_ids`` starts any other process as the worker user.
"""

from providers.claude import root_refusal as claude_root_refusal
from providers.environment import worker_environment
from providers.model import Attempt, Classification, Progress, ProviderRequest
from providers.run import run_attempt
from providers.supervisor import user_ids

__all__ = [
    "Attempt",
    "Classification",
    "Progress",
    "ProviderRequest",
    "claude_root_refusal",
    "run_attempt",
    "user_ids",
    "worker_environment",
]
