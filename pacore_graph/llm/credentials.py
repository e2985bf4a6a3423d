"""Where the API key comes from: the argument, else the environment, else a placeholder."""

from __future__ import annotations

import os

__all__ = ["API_KEY_ENV_VARS", "resolve_api_key"]

#: Environment variables read for the API key, in order.
API_KEY_ENV_VARS = ("PACORE_API_KEY", "OPENAI_API_KEY")


def resolve_api_key(explicit: str | None = None) -> str:
    """The API key: the argument, else ``PACORE_API_KEY``, else ``OPENAI_API_KEY``.

    Local servers (vLLM, llama.cpp) accept any key, so the fallback is a
    placeholder rather than an error.
    """
    if explicit:
        return explicit
    for name in API_KEY_ENV_VARS:
        value = os.environ.get(name)
        if value:
            return value
    return "EMPTY"
