"""Old name of :mod:`pacore_graph.otel.spans` (the spans of a run); re-exports it unchanged."""

from __future__ import annotations

from pacore_graph.otel import spans as _spans
from pacore_graph.otel.spans import *  # noqa: F403 (the same names, under the old module)

__all__ = list(_spans.__all__)
