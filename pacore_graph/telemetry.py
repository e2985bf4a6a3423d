"""Old name of :mod:`pacore_graph.otel.exporters` (where spans go); re-exports it unchanged."""

from __future__ import annotations

from pacore_graph.otel.exporters import (
    JAEGER_ENDPOINT,
    LANGFUSE_DEFAULT_HOST,
    TRACE_KINDS,
    TRACES_EXPORTER_ENV,
    TRACES_EXPORTER_VALUES,
    TracingConfigError,
    configure_tracing,
    exporter_kinds,
    langfuse_endpoint_and_headers,
)

__all__ = [
    "JAEGER_ENDPOINT",
    "LANGFUSE_DEFAULT_HOST",
    "TRACES_EXPORTER_ENV",
    "TRACES_EXPORTER_VALUES",
    "TRACE_KINDS",
    "TracingConfigError",
    "configure_tracing",
    "exporter_kinds",
    "langfuse_endpoint_and_headers",
]
