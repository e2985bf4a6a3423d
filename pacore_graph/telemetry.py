"""Old name of :mod:`pacore_graph.otel.exporters` (where spans go); re-exports it unchanged."""

from __future__ import annotations

from pacore_graph.otel import exporters as _exporters
from pacore_graph.otel.exporters import *  # noqa: F403 (the same names, under the old module)

__all__ = list(_exporters.__all__)
