"""The operator's settings that point every real CLI at the scripted model server
(``bench/modelserver.py``; docs/configuration.md, "Your own model gateway"): shared by
tests/realrun and the waste figure, so both drive the CLIs the same way."""

from __future__ import annotations

import json

#: The scripted gateway's id in codex's configuration, and the variable its key is in.
GATEWAY = "scripted"
GATEWAY_KEY = "SCRIPTED_GATEWAY_KEY"
#: The scripted server's model for opencode, as a lane-runner model name (``provider:model``).
OPENCODE_MODEL = f"{GATEWAY}:scripted-model"


def base_url(port: int, provider: str) -> str:
    """What each CLI is pointed at: codex appends ``/responses``, opencode
    ``/chat/completions``, claude ``/v1/messages``, gemini ``/v1beta/models/...``."""
    root = f"http://127.0.0.1:{port}"
    return f"{root}/v1" if provider in ("codex", "opencode") else root


def opencode_config(port: int) -> str:
    """``OPENCODE_CONFIG_CONTENT``: a custom OpenAI-compatible provider at the server, its
    key named, not given (opencode reads ``{env:...}``)."""
    return json.dumps({
        "provider": {GATEWAY: {
            "npm": "@ai-sdk/openai-compatible", "name": "Scripted model server",
            "options": {"baseURL": base_url(port, "opencode"), "apiKey": f"{{env:{GATEWAY_KEY}}}"},
            "models": {"scripted-model": {"name": "scripted-model"}},
        }},
        "autoupdate": False, "share": "disabled",
    })


def settings(port: int) -> dict[str, object]:
    """The config keys that send all four CLIs to the server on ``port``."""
    return {
        "opencode_env": {"OPENCODE_CONFIG_CONTENT": opencode_config(port),
                         GATEWAY_KEY: "scripted-opencode-key"},
        "opencode_models": dict.fromkeys(("low", "medium", "high", "xhigh"), OPENCODE_MODEL),
        "gemini_env": {"GOOGLE_GEMINI_BASE_URL": base_url(port, "gemini"),
                       "GEMINI_API_KEY": "scripted-gemini-key"},
        "codex_config": {
            "model_provider": GATEWAY,
            "model_providers": {GATEWAY: {
                "name": "Scripted model server",
                "base_url": base_url(port, "codex"),
                "wire_api": "responses",
                "env_key": GATEWAY_KEY,
                "requires_openai_auth": False,
                "request_max_retries": 1,
                "stream_max_retries": 1,
            }},
            "analytics": {"enabled": False},
            "features": {"plugins": False},
        },
        "codex_env": {GATEWAY_KEY: "scripted-codex-key"},
        "claude_env": {"ANTHROPIC_BASE_URL": base_url(port, "claude")},
    }
