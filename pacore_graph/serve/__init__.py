"""``pacore serve``: PaCoRe behind an OpenAI-compatible HTTP API.

An application that talks to an OpenAI-compatible server switches to PaCoRe
by changing ``base_url`` and picking ``model="pacore-high"`` (or
``pacore:8,2``; or another method: ``rsa:16,4,10``, ``deepconf-online:16``);
the server spreads the explorers' samples over every upstream replica.
Modules: :mod:`~pacore_graph.serve.app` (the ASGI app),
:mod:`~pacore_graph.serve.protocol` (requests and answers),
:mod:`~pacore_graph.serve.streaming` (SSE), :mod:`~pacore_graph.serve.queue`
(the FIFO run queue), :mod:`~pacore_graph.serve.metrics` (``/metrics``),
:mod:`~pacore_graph.serve.passthrough` (plain model names relayed),
:mod:`~pacore_graph.serve.method_graphs` (the other methods' graphs),
:mod:`~pacore_graph.serve.settings` and :mod:`~pacore_graph.serve.server`
(uvicorn); model names are parsed by
:mod:`pacore_graph.settings.grammar`. Needs the ``serve`` extra:
``pip install 'pacore-graph[serve]'``.
"""

from pacore_graph.serve.app import ServeState, create_app
from pacore_graph.serve.errors import APIError
from pacore_graph.serve.server import serve
from pacore_graph.serve.settings import API_KEY_ENV_VAR, ServeSettings
from pacore_graph.settings.grammar import (
    LISTED_MODELS,
    SERVED_MODELS,
    parse_model_name,
    parse_served_model,
)

__all__ = [
    "API_KEY_ENV_VAR",
    "LISTED_MODELS",
    "SERVED_MODELS",
    "APIError",
    "ServeSettings",
    "ServeState",
    "create_app",
    "parse_model_name",
    "parse_served_model",
    "serve",
]
