"""The embedded default model: SmolLM2-135M-Instruct served on loopback, K samples decoded together.

- :mod:`~pacore_graph.embedded.process`: :class:`EmbeddedServer`, the child
  process every entry point starts when no ``--base-url`` is given, and
  :func:`model_endpoint`;
- :mod:`~pacore_graph.embedded.server`, :mod:`~pacore_graph.embedded.app`:
  the OpenAI-compatible HTTP server the child runs (``pacore model serve``
  runs it in the foreground);
- :mod:`~pacore_graph.embedded.engine`: continuous batching over llama.cpp
  (the ``cyllama`` wheels), one sampler per sequence;
- :mod:`~pacore_graph.embedded.weights`: where the GGUF file comes from.

Only the process-side names are imported here: the engine is loaded by the
child, never by a caller that merely starts it.
"""

from __future__ import annotations

from pacore_graph.embedded.process import (
    DEFAULT_MAX_SEQUENCES,
    DEFAULT_MODEL_ALIAS,
    EmbeddedServer,
    model_endpoint,
)
from pacore_graph.embedded.weights import (
    INSTALL_HINT,
    EmbeddedServerError,
    find_default_model,
)

__all__ = [
    "DEFAULT_MAX_SEQUENCES",
    "DEFAULT_MODEL_ALIAS",
    "INSTALL_HINT",
    "EmbeddedServer",
    "EmbeddedServerError",
    "find_default_model",
    "model_endpoint",
]
