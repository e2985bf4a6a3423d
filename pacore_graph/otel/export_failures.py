"""When spans cannot be delivered: one line of ours, and an exit that does not wait for retries.

OpenTelemetry's OTLP/HTTP exporter retries a failed export with backoff for
up to its timeout (10 s by default) and logs every attempt. For a command
that ends (``pacore run "..." --trace jaeger`` with no Jaeger listening) that
meant the answer followed by 8-10 s of "Transient error ... retrying in
2.24s" lines, all saying one thing. Here:

- while :func:`tracing_session` is open, the exporter's warnings and errors
  become **one** line (where the spans were going, why they did not get
  there), printed the first time, the rest dropped; the run goes on;
- when it closes, it flushes the last spans and shuts the provider down in a
  helper thread, waiting while the export is making progress, at most
  ``grace`` seconds, and not at all once an export has failed: the retries
  cannot succeed within a command's exit (the collector is down or
  refusing), so the command does not sit through them. The helper thread is
  a daemon and ends with the process.

Only loggers of the exporter classes we configure are filtered, and only
while tracing is set up; a library user who builds their own provider is
not affected.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

__all__ = [
    "SHUTDOWN_GRACE",
    "ExportFailureReport",
    "trace_destinations",
    "tracing_session",
]

SHUTDOWN_GRACE = 5.0
"""Seconds a command waits at exit for its last spans to reach a collector that answers."""

#: The loggers the OTLP/HTTP span exporter logs its retries and failures on.
_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.common.http",
)
_DEFAULT_OTLP_ENDPOINT = "http://localhost:4318"


def trace_destinations(
    kinds: Sequence[str],
    *,
    endpoint: str | None = None,
    env: Mapping[str, str] = os.environ,
) -> list[str]:
    """Where each exporter of ``kinds`` sends spans, as a reader would name it (for messages).

    Mirrors :func:`~pacore_graph.otel.exporters.configure_tracing` and the
    OTLP exporter's own reading of ``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT``.
    """
    from pacore_graph.otel.exporters import JAEGER_ENDPOINT, langfuse_endpoint_and_headers

    found: list[str] = []
    for kind in kinds:
        if kind == "console":
            continue
        if endpoint:
            found.append(endpoint)
        elif kind == "jaeger":
            found.append(JAEGER_ENDPOINT)
        elif kind == "langfuse":
            try:
                found.append(langfuse_endpoint_and_headers(env)[0])
            except ValueError:
                found.append("Langfuse")
        else:
            traces = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or _DEFAULT_OTLP_ENDPOINT
            found.append(traces or f"{base.rstrip('/')}/v1/traces")
    return list(dict.fromkeys(found))


def _cause(message: str) -> str:
    """Why an export failed, in a few words, from the exporter's log message."""
    if "Connection refused" in message or "Errno 111" in message:
        return "connection refused: is the collector running?"
    status = re.search(r"code: (\d{3}), reason: ([^,]*)", message)
    if status:
        return f"HTTP {status.group(1)} {status.group(2).strip()}".rstrip()
    if "timed out" in message.lower() or "timeout" in message.lower():
        return "timed out"
    if "Name or service not known" in message or "getaddrinfo" in message:
        return "unknown host"
    return message.splitlines()[0][:160] if message else "unknown error"


class ExportFailureReport(logging.Filter):
    """Drops the exporter's warnings and errors; writes one line of ours for the first.

    ``failures`` counts them (a retry is one), so the shutdown can stop
    waiting for an export that has started failing. Once the session is
    over (:meth:`close`) it keeps quiet only the threads it saw exporting (a
    shutdown still retrying) and lets everything else through, so a later
    session in the same process gets its own records.
    """

    def __init__(self, destinations: Sequence[str], write: Callable[[str], Any]) -> None:
        super().__init__()
        self.destinations = list(destinations)
        self.failures = 0
        self._write = write
        self._lock = threading.Lock()
        self._open = True
        self._threads: set[int | None] = set()

    def close(self) -> None:
        """The session is over: from now on only its own exporting threads are kept quiet."""
        self._open = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        with self._lock:
            if not self._open and record.thread not in self._threads:
                return True
            self._threads.add(record.thread)
            self.failures += 1
            if self.failures == 1:
                where = ", ".join(self.destinations) or "the trace exporter"
                self._write(
                    f"pacore: warning: spans not sent to {where} ({_cause(record.getMessage())}); "
                    "the run goes on without them\n"
                )
        return False

    def attach(self) -> None:
        for name in _EXPORTER_LOGGERS:
            logging.getLogger(name).addFilter(self)

    def detach(self) -> None:
        for name in _EXPORTER_LOGGERS:
            logging.getLogger(name).removeFilter(self)


def _shutdown(provider: Any, report: ExportFailureReport, grace: float) -> bool:
    """Shut ``provider`` down in a daemon thread; True when it finished while we waited.

    We wait until it is done, ``grace`` has passed, or ``report`` saw the
    final export fail. The thread detaches ``report`` when it ends, so the
    retries it still makes after we stopped waiting stay quiet.
    """
    done = threading.Event()
    failures_before = report.failures

    def run() -> None:
        try:
            provider.shutdown()
        finally:
            done.set()
            report.detach()

    threading.Thread(target=run, name="pacore-trace-shutdown", daemon=True).start()
    deadline = time.monotonic() + grace
    while not done.wait(0.05):
        if report.failures > failures_before or time.monotonic() >= deadline:
            break
    return done.is_set()


@contextlib.contextmanager
def tracing_session(
    provider: Any,
    destinations: Sequence[str],
    write: Callable[[str], Any],
    *,
    grace: float = SHUTDOWN_GRACE,
) -> Iterator[ExportFailureReport]:
    """Export failures as one line while inside; at the end, a shutdown bounded as the module says.

    ``provider`` is the SDK ``TracerProvider`` from
    :func:`~pacore_graph.otel.exporters.configure_tracing`; ``destinations``
    name where its spans go (:func:`trace_destinations`); ``write`` takes the
    one warning line (``sys.stderr.write``).
    """
    report = ExportFailureReport(destinations, write)
    report.attach()
    try:
        yield report
    finally:
        _shutdown(provider, report, grace)
        report.close()
