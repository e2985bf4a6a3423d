"""OpenTelemetry SDK set-up in one call: where the spans of :mod:`pacore_graph.tracing` go.

``pacore run --trace KIND`` and library users call :func:`configure_tracing`
with one of:

- ``console``: spans printed as JSON to stderr (stdout stays clean for ``--json``);
- ``otlp``: OTLP/HTTP configured by the standard ``OTEL_EXPORTER_OTLP_*``
  variables (default ``http://localhost:4318/v1/traces``);
- ``jaeger``: OTLP/HTTP to Jaeger all-in-one at ``http://localhost:4318/v1/traces``;
- ``langfuse``: OTLP/HTTP to ``$LANGFUSE_HOST/api/public/otel/v1/traces`` with
  Basic auth from ``LANGFUSE_PUBLIC_KEY`` / ``LANGFUSE_SECRET_KEY``.

The service name comes from ``OTEL_SERVICE_NAME`` (default ``pacore-graph``) and
``OTEL_RESOURCE_ATTRIBUTES`` is honoured. Users with their own
``TracerProvider`` skip this module and pass it to ``build_pacore_graph`` (or
set it globally). Credentials go only into the exporter's HTTP headers, never
into spans or logs.
"""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Mapping
from typing import Any

__all__ = [
    "JAEGER_ENDPOINT",
    "LANGFUSE_DEFAULT_HOST",
    "TRACE_KINDS",
    "TracingConfigError",
    "configure_tracing",
    "langfuse_endpoint_and_headers",
]

TRACE_KINDS = ("console", "otlp", "jaeger", "langfuse")
JAEGER_ENDPOINT = "http://localhost:4318/v1/traces"
LANGFUSE_DEFAULT_HOST = "https://cloud.langfuse.com"


class TracingConfigError(ValueError):
    """Tracing was asked for but cannot be set up as configured."""


def langfuse_endpoint_and_headers(
    env: Mapping[str, str] = os.environ,
) -> tuple[str, dict[str, str]]:
    """Langfuse's OTLP endpoint and Basic-auth header from the ``LANGFUSE_*`` variables."""
    public = env.get("LANGFUSE_PUBLIC_KEY", "").strip()
    secret = env.get("LANGFUSE_SECRET_KEY", "").strip()
    if not public or not secret:
        raise TracingConfigError(
            "--trace langfuse needs LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY "
            "(and LANGFUSE_HOST for a self-hosted Langfuse)"
        )
    host = env.get("LANGFUSE_HOST") or env.get("LANGFUSE_BASE_URL") or LANGFUSE_DEFAULT_HOST
    token = base64.b64encode(f"{public}:{secret}".encode()).decode("ascii")
    return f"{host.rstrip('/')}/api/public/otel/v1/traces", {"Authorization": f"Basic {token}"}


def configure_tracing(
    kind: str = "otlp",
    *,
    endpoint: str | None = None,
    headers: Mapping[str, str] | None = None,
    service_name: str | None = None,
    batch: bool = True,
    set_global: bool = False,
    env: Mapping[str, str] = os.environ,
) -> Any:
    """Build an SDK ``TracerProvider`` exporting to ``kind``; return it.

    Pass it to ``build_pacore_graph(..., tracing=TraceOptions(tracer_provider=p))``
    or use ``set_global=True``. Call ``provider.shutdown()`` at exit so batched
    spans are flushed (the CLI does).
    """
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
        SpanExporter,
    )

    if kind not in TRACE_KINDS:
        raise TracingConfigError(f"unknown trace kind {kind!r}; choose {', '.join(TRACE_KINDS)}")
    exporter: SpanExporter
    if kind == "console":
        exporter = ConsoleSpanExporter(out=sys.stderr)
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise TracingConfigError(
                f"--trace {kind} needs opentelemetry-exporter-otlp-proto-http "
                "(a dependency of pacore-graph: reinstall it)"
            ) from None
        extra = dict(headers or {})
        if kind == "jaeger":
            endpoint = endpoint or JAEGER_ENDPOINT
        elif kind == "langfuse":
            lf_endpoint, lf_headers = langfuse_endpoint_and_headers(env)
            endpoint = endpoint or lf_endpoint
            extra = {**lf_headers, **extra}
        exporter = OTLPSpanExporter(endpoint=endpoint, headers=extra or None)
    name = service_name or env.get("OTEL_SERVICE_NAME") or "pacore-graph"
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    if set_global:
        trace.set_tracer_provider(provider)
    return provider
