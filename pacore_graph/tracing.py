"""Old name of :mod:`pacore_graph.otel.spans` (the spans of a run); re-exports it unchanged."""

from __future__ import annotations

from pacore_graph.otel.spans import (
    CAPTURE_CONTENT_ENV,
    INSTRUMENTATION_NAME,
    RunTracer,
    TraceOptions,
    capture_content_from_env,
    model_step_span,
    record_chat_request,
    record_chat_response,
    tool_span,
)

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "INSTRUMENTATION_NAME",
    "RunTracer",
    "TraceOptions",
    "capture_content_from_env",
    "model_step_span",
    "record_chat_request",
    "record_chat_response",
    "tool_span",
]
