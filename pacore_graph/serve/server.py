"""Running the app under uvicorn, as ``pacore serve`` does.

uvicorn handles SIGTERM and SIGINT itself: it stops accepting connections,
lets requests in flight finish (here: whole PaCoRe runs, streamed or not)
for up to ``drain_timeout`` seconds, runs the app's shutdown (closing the
upstream sessions) and returns.

The connection limits live here (:func:`uvicorn_config`), from
:class:`~pacore_graph.serve.settings.ServeSettings`: at most
``max_connections`` open connections (uvicorn answers 503 beyond),
``keep_alive_s`` idle between requests, 16 KiB of request head, and
``header_timeout_s`` to send a request's headers -- uvicorn has no such
deadline of its own, so a connection that dribbles its headers (slow-loris)
would stay open for ever; :func:`header_deadline_protocol` closes it.
"""

from __future__ import annotations

import asyncio
import sys
from types import FrameType
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from pacore_graph.embedded.server import is_loopback
from pacore_graph.serve.app import ServeState, create_app
from pacore_graph.serve.settings import ServeSettings

__all__ = [
    "MAX_REQUEST_HEAD_BYTES",
    "header_deadline_protocol",
    "is_loopback",
    "serve",
    "serve_async",
    "uvicorn_config",
]

#: Largest request line plus headers accepted (h11's incomplete-event limit).
MAX_REQUEST_HEAD_BYTES = 16 * 1024


class _HeaderDeadline(H11Protocol):
    """uvicorn's h11 protocol, closing a connection that is slow to send a request's headers.

    The deadline runs from the connection's start and from the end of each
    response until the next request's headers are complete.
    """

    header_timeout_s: float = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a request's headers arrived
            self._disarm_header_timer()

    def on_response_complete(self) -> None:
        self._arm_header_timer()  # before: super() may start a pipelined request at once
        super().on_response_complete()

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_late)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_late(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def header_deadline_protocol(header_timeout_s: float) -> type[H11Protocol]:
    """An h11 protocol class closing connections whose request headers take too long."""
    return type("HeaderDeadlineH11", (_HeaderDeadline,), {"header_timeout_s": header_timeout_s})


def uvicorn_config(
    app: Any,
    settings: ServeSettings,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    drain_timeout: int | None = 600,
    log_level: str = "info",
) -> uvicorn.Config:
    """uvicorn's configuration for ``app`` with the server's connection limits."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=drain_timeout,
        access_log=False,
        lifespan="on",
        http=header_deadline_protocol(settings.header_timeout_s),
        limit_concurrency=settings.max_connections,
        timeout_keep_alive=max(1, round(settings.keep_alive_s)),
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD_BYTES,
    )


class _DrainingServer(uvicorn.Server):
    """uvicorn's server, marking the app as draining as soon as a signal arrives.

    From then on ``/health`` answers 503 (load balancers stop sending) and any
    request still arriving on an open connection is refused with 503, while
    the runs already in flight finish.
    """

    def __init__(self, config: uvicorn.Config, state: ServeState) -> None:
        super().__init__(config)
        self._state = state

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._state.draining = True
        super().handle_exit(sig, frame)


def _server(
    settings: ServeSettings, host: str, port: int, drain_timeout: int | None, log_level: str
) -> _DrainingServer:
    app = create_app(settings)
    config = uvicorn_config(
        app, settings, host=host, port=port, drain_timeout=drain_timeout, log_level=log_level
    )
    upstreams = ", ".join(settings.upstreams)  # credentials were refused by ServeSettings
    plain = f"; {settings.model} passed through" if settings.passthrough else ""
    print(
        f"pacore serve: models pacore-low|medium|high and pacore:K,.. over {settings.model} "
        f"at {upstreams}{plain}",
        file=sys.stderr,
        flush=True,
    )
    return _DrainingServer(config, app.state.pacore)


def serve(
    settings: ServeSettings,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    drain_timeout: int | None = 600,
    log_level: str = "info",
) -> None:
    """Serve until SIGTERM/SIGINT, then drain and return."""
    _server(settings, host, port, drain_timeout, log_level).run()


async def serve_async(
    settings: ServeSettings,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    drain_timeout: int | None = 600,
    log_level: str = "info",
) -> None:
    """:func:`serve` in a running loop: beside something else the loop owns (the embedded model)."""
    await _server(settings, host, port, drain_timeout, log_level).serve()
