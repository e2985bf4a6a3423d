"""Where ``--trace KIND`` may send spans: the names, without the SDK that sends them.

The settings catalogue offers these as the choices of ``trace``, and
:func:`pacore_graph.otel.exporters.configure_tracing` builds an exporter for
each. The names live here, below both, because the settings layer sits under
``otel`` and the command-line parser must not load OpenTelemetry to list
them (``tests/test_lazy_imports.py``).
"""

from __future__ import annotations

__all__ = ["TRACE_KINDS"]

#: The exporters ``configure_tracing`` can build, in the order help lists them.
TRACE_KINDS = ("console", "otlp", "jaeger", "langfuse")
