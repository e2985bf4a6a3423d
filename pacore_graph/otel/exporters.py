"""OpenTelemetry SDK set-up in one call: where the spans of :mod:`pacore_graph.otel.spans` go.

``pacore run --trace KIND`` and library users call :func:`configure_tracing`
with one of:

- ``console``: spans printed as JSON to stderr (stdout stays clean for ``--json``);
- ``otlp``: OTLP/HTTP configured by the standard ``OTEL_EXPORTER_OTLP_*``
  variables (default ``http://localhost:4318/v1/traces``);
- ``jaeger``: OTLP/HTTP to Jaeger all-in-one at ``http://localhost:4318/v1/traces``;
- ``langfuse``: OTLP/HTTP to ``$LANGFUSE_HOST/api/public/otel/v1/traces`` with
  Basic auth from ``LANGFUSE_PUBLIC_KEY`` / ``LANGFUSE_SECRET_KEY``.

Without ``--trace``, the standard ``OTEL_TRACES_EXPORTER`` variable decides
(:func:`exporter_kinds`): ``console``, ``otlp`` or a comma-separated list of
them, and ``none`` (or unset) for no tracing; ``--trace`` wins over it.

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
from collections.abc import Mapping, Sequence
from typing import Any

from pacore_graph.errors import PaCoReError
from pacore_graph.values.trace_kinds import TRACE_KINDS

__all__ = [
    "DEFAULT_TRACE_PROJECT",
    "JAEGER_ENDPOINT",
    "LANGFUSE_DEFAULT_HOST",
    "PROJECT_ATTRIBUTE",
    "TRACES_EXPORTER_ENV",
    "TRACES_EXPORTER_VALUES",
    "TRACE_KINDS",
    "TracingConfigError",
    "configure_tracing",
    "exporter_kinds",
    "langfuse_endpoint_and_headers",
]

#: The resource attribute Arize Phoenix reads to file spans under a project.
PROJECT_ATTRIBUTE = "openinference.project.name"
#: The project runs land in unless ``--trace-project`` names another.
DEFAULT_TRACE_PROJECT = "pacore"
TRACES_EXPORTER_ENV = "OTEL_TRACES_EXPORTER"
TRACES_EXPORTER_VALUES = ("console", "otlp", "none")
"""What ``OTEL_TRACES_EXPORTER`` may hold here (the SDK's names; zipkin and
prometheus exporters are not installed)."""
JAEGER_ENDPOINT = "http://localhost:4318/v1/traces"
LANGFUSE_DEFAULT_HOST = "https://cloud.langfuse.com"


class TracingConfigError(PaCoReError):
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


def exporter_kinds(flag: str | None = None, env: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """The exporters to set up: ``--trace KIND`` if given, else ``OTEL_TRACES_EXPORTER``.

    ``()`` means no tracing: no flag and the variable unset, empty or
    ``none``. The variable is a comma-separated list (``console,otlp``), as
    the SDK reads it; a value this package cannot export to raises
    :class:`TracingConfigError` naming the variable and what it may hold.
    """
    if flag:
        return (flag,)
    raw = env.get(TRACES_EXPORTER_ENV, "").strip().lower()
    kinds = tuple(dict.fromkeys(k.strip() for k in raw.split(",") if k.strip()))
    unknown = [k for k in kinds if k not in TRACES_EXPORTER_VALUES]
    if unknown:
        raise TracingConfigError(
            f"{TRACES_EXPORTER_ENV}={raw!r}: cannot export to {', '.join(unknown)}; "
            f"use {', '.join(TRACES_EXPORTER_VALUES)} (or a comma-separated list)"
        )
    if "none" in kinds:
        return ()
    return kinds


def configure_tracing(
    kind: str | Sequence[str] | None = "otlp",
    *,
    endpoint: str | None = None,
    headers: Mapping[str, str] | None = None,
    service_name: str | None = None,
    project: str | None = None,
    batch: bool = True,
    set_global: bool = False,
    env: Mapping[str, str] = os.environ,
) -> Any:
    """Build an SDK ``TracerProvider`` exporting to ``kind``; return it.

    ``kind`` is one of :data:`TRACE_KINDS` or several of them (one span
    processor each); ``None`` reads ``OTEL_TRACES_EXPORTER`` from ``env``
    (:func:`exporter_kinds`), and when that says ``none`` the provider records
    spans but exports them nowhere. Pass it to
    ``build_pacore_graph(..., tracing=TraceOptions(tracer_provider=p))`` or
    use ``set_global=True``. Call ``provider.shutdown()`` at exit so batched
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

    from pacore_graph import __version__

    kinds = (
        exporter_kinds(None, env) if kind is None else (kind,) if isinstance(kind, str) else kind
    )
    for k in kinds:
        if k not in TRACE_KINDS:
            raise TracingConfigError(f"unknown trace kind {k!r}; choose {', '.join(TRACE_KINDS)}")
    exporters: list[SpanExporter] = []
    for k in kinds:
        if k == "console":
            exporters.append(ConsoleSpanExporter(out=sys.stderr))
            continue
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise TracingConfigError(
                f"--trace {k} needs opentelemetry-exporter-otlp-proto-http "
                "(a dependency of pacore-graph: reinstall it)"
            ) from None
        extra = dict(headers or {})
        target = endpoint
        if k == "jaeger":
            target = endpoint or JAEGER_ENDPOINT
        elif k == "langfuse":
            lf_endpoint, lf_headers = langfuse_endpoint_and_headers(env)
            target = endpoint or lf_endpoint
            extra = {**lf_headers, **extra}
        exporters.append(OTLPSpanExporter(endpoint=target, headers=extra or None))
    name = service_name or env.get("OTEL_SERVICE_NAME") or "pacore-graph"
    resource = Resource.create(
        {
            "service.name": name,
            "service.version": __version__,
            # Arize Phoenix files spans under this project (it ignores service.name).
            PROJECT_ATTRIBUTE: project or DEFAULT_TRACE_PROJECT,
        }
    )
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        processor = BatchSpanProcessor(exporter) if batch else SimpleSpanProcessor(exporter)
        provider.add_span_processor(processor)
    if set_global:
        trace.set_tracer_provider(provider)
    return provider
