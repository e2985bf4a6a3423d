"""The PaCoRe graph configured from environment variables, for serving.

``langgraph.json`` points here, so ``langgraph dev`` serves PaCoRe against any
OpenAI-compatible server. The variables are the ``pacore`` command's own
(:class:`pacore_graph.settings.env_settings.PaCoReSettings`, read the same way), with
defaults suited to a server:

- ``PACORE_BASE_URL`` (default ``http://localhost:8000/v1``, vLLM's default;
  comma-separated URLs are replicas of one model)
- ``PACORE_MODEL`` (default ``pacore-8b``)
- ``PACORE_PRESET`` (``low`` | ``medium`` | ``high``, default ``low``) or
  ``PACORE_ROUNDS`` (e.g. ``8,2``)
- ``PACORE_MAX_CONCURRENCY`` (default 64, as for ``pacore run``), ``PACORE_MAX_TOKENS``
  (default unset)
- ``PACORE_TEMPERATURE``, ``PACORE_TOP_P``, ``PACORE_TIMEOUT``, ``PACORE_SEED``,
  ``PACORE_RETRIES``, ``PACORE_COMPACTOR``, ``PACORE_REFERENCE_ORDER``, ...
- ``PACORE_API_KEY`` / ``OPENAI_API_KEY``
- ``PACORE_REFERENCE_FILTER`` (``confidence:F``) and ``PACORE_CONSENSUS_WEIGHT``
  (``confidence``): PaCoRe with DeepConf's confidence (asks for log-probabilities;
  :mod:`pacore_graph.graphs.pacore_confidence`), off unless set
- ``PACORE_MAX_ROUNDS`` (16), ``PACORE_MAX_SAMPLES_PER_REQUEST`` (4096),
  ``PACORE_MAX_TOKENS_CAP`` (131072): the caps on what one request may ask for

Each request may change the run's shape through its context (the graph's
``context_schema``, published by ``langgraph dev``): ``preset``, ``rounds``,
``compactor``, ``temperature``, ``top_p``, ``max_tokens``, ``seed`` (see
:mod:`pacore_graph.settings.per_run`), within those caps; its ``compactor``
is a built-in name (``conclusion``, ``answer``, ``budget:N``), never a
``module:attr`` (``PACORE_COMPACTOR``, the operator's, may be one). The
assistant publishes the graph's input and output schemas, the context schema
with each setting's type, bounds (the caps included) and the graph's own
value as its default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pacore_graph.graphs.pacore_confidence import build_pacore_for_config
from pacore_graph.llm.multi_client import chat_client_for
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.env_settings import PaCoReSettings, load_settings

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_MODEL", "config_from_env", "graph", "make_graph"]

#: Where the served graph looks for a model when ``PACORE_BASE_URL`` is unset.
DEFAULT_BASE_URL = "http://localhost:8000/v1"
DEFAULT_MODEL = "pacore-8b"


def _settings(env: Mapping[str, str]) -> PaCoReSettings:
    return load_settings(env=env)


def config_from_env(env: Mapping[str, str] = os.environ) -> PaCoReConfig:
    """Read the run shape from ``PACORE_*`` variables (validated like any config)."""
    return _settings(env).to_config()


def make_graph(env: Mapping[str, str] = os.environ) -> Any:
    """Build the served graph from ``env``."""
    settings = _settings(env)
    config = settings.to_config()
    client = chat_client_for(
        settings.base_url or [DEFAULT_BASE_URL],
        settings.model or DEFAULT_MODEL,
        api_key=settings.api_key,
        retry=config.retry,
    )
    return build_pacore_for_config(
        client,
        config=config,
        compactor=settings.compactor,  # a name, so the context schema shows it as the default
        limits=settings.limits(),
    )


graph = make_graph()
