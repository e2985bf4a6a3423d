"""The PaCoRe graph configured from environment variables, for serving.

``langgraph.json`` points here, so ``langgraph dev`` serves PaCoRe against any
OpenAI-compatible server:

- ``PACORE_BASE_URL`` (default ``http://localhost:8000/v1``, vLLM's default)
- ``PACORE_MODEL`` (default ``pacore-8b``)
- ``PACORE_PRESET`` (``low`` | ``medium`` | ``high``, default ``low``) or
  ``PACORE_ROUNDS`` (e.g. ``8,2``)
- ``PACORE_MAX_CONCURRENCY`` (default 64), ``PACORE_MAX_TOKENS`` (default unset)
- ``PACORE_API_KEY`` / ``OPENAI_API_KEY``

Each request may change the run's shape through ``config.configurable``:
``preset``, ``rounds``, ``compactor``, ``temperature``, ``top_p``,
``max_tokens``, ``seed`` (see :mod:`pacore_graph.settings`); the assistant
publishes the graph's input and output schemas.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pacore_graph.client import OpenAICompatClient
from pacore_graph.config import PRESETS, PaCoReConfig, SamplingParams
from pacore_graph.graph import build_pacore_graph

__all__ = ["config_from_env", "graph", "make_graph"]


def config_from_env(env: Mapping[str, str] = os.environ) -> PaCoReConfig:
    """Read the run shape from ``PACORE_*`` variables (validated like any config)."""
    rounds_text = env.get("PACORE_ROUNDS")
    rounds: Any = (
        [int(x) for x in rounds_text.split(",") if x.strip()]
        if rounds_text
        else PRESETS[env.get("PACORE_PRESET", "low")]
    )
    max_tokens = env.get("PACORE_MAX_TOKENS")
    return PaCoReConfig(
        rounds=rounds,
        max_concurrency=int(env.get("PACORE_MAX_CONCURRENCY", "64")),
        sampling=SamplingParams(max_tokens=int(max_tokens) if max_tokens else None),
    )


def make_graph(env: Mapping[str, str] = os.environ) -> Any:
    """Build the served graph from ``env``."""
    client = OpenAICompatClient(
        env.get("PACORE_BASE_URL", "http://localhost:8000/v1"),
        env.get("PACORE_MODEL", "pacore-8b"),
    )
    return build_pacore_graph(client, config=config_from_env(env))


graph = make_graph()
