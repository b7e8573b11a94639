"""CLIs with no schema flag (opencode, Gemini CLI): the answer is asked for in words.

codex (``--output-schema``) and claude (``--json-schema``) are held to the wire schema
by the CLI itself. opencode and gemini have no such flag: the prompt asks for the one
JSON object and gives the schema, the adapter reads the final message and ``run.py``
validates it, and a reply that is not the schema (prose, a code fence around half an
object, a field missing) gets one repair turn in the same session: the CLI resumes,
is told what was wrong, and answers again without redoing the work. One turn, not a
loop: a model that cannot answer in the schema twice fails the attempt, and the
runner's next attempt is told why (``run/context.after_failure``).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from lane_runner.providers.adapter import CLIAdapter, RunOnce
from lane_runner.providers.model import Attempt, ProviderRequest

#: Repair turns one attempt may take.
REPAIR_TURNS = 1
#: How much of the refusal the repair turn quotes.
REASON_CHARS = 500


def asking(prompt: str, schema: str) -> str:
    """``prompt`` with the answer's form stated: the CLI has no flag that enforces it."""
    return (
        f"{prompt}\n\n## Your final message\n"
        "End with a final message that is only one JSON object, with no prose and no code "
        "fence around it, valid against this JSON schema:\n"
        f"{schema.strip()}\n"
    )


def repair(reason: str, schema: str) -> str:
    """The repair turn's whole prompt: what was wrong, and the form again."""
    said = " ".join(reason.split())[:REASON_CHARS]
    return (
        f"Your last message was not accepted as the answer ({said}). Do not redo the work. "
        "Reply now with only one JSON object, no prose and no code fence, valid against "
        f"this JSON schema:\n{schema.strip()}\n"
    )


class PromptedAnswer(CLIAdapter):
    """A ``CLIAdapter`` whose answer is asked for in the prompt and repaired in its session."""

    def attempt(self, req: ProviderRequest, run_once: RunOnce) -> Attempt:
        """The first start (with the CLI's session fallbacks), then at most
        ``REPAIR_TURNS`` repair turns resuming the session it named."""
        schema = req.schema_path.read_text(encoding="utf-8")
        asked = asking(req.prompt, schema)

        def with_form(argv: list[str], result_file: Path | None, prompt: str | None = None
                      ) -> Attempt:
            return run_once(argv, result_file, asked if prompt is None else asking(prompt, schema))

        attempt = super().attempt(req, with_form)
        for _ in range(REPAIR_TURNS):
            if not attempt.repairable or not attempt.session_id:
                break
            attempt = self._repair(req, run_once, attempt, schema)
        return attempt

    def _repair(
        self, req: ProviderRequest, run_once: RunOnce, failed: Attempt, schema: str
    ) -> Attempt:
        session = failed.session_id
        resumed = dataclasses.replace(req, session_id=session, resume=True)
        argv = self.argv(resumed, resume=True, result_file=req.result_file, schema=schema)
        repaired = run_once(argv, None, repair(failed.reason, schema))
        repaired.session_id = repaired.session_id or session
        return repaired
