"""Running the app under uvicorn, as ``pacore serve`` does.

uvicorn handles SIGTERM and SIGINT itself: it stops accepting connections,
lets requests in flight finish (here: whole PaCoRe runs, streamed or not)
for up to ``drain_timeout`` seconds, runs the app's shutdown (closing the
upstream sessions) and returns.
"""

from __future__ import annotations

import sys
from types import FrameType

import uvicorn

from pacore_graph.serve.app import ServeState, create_app
from pacore_graph.serve.settings import ServeSettings

__all__ = ["serve"]


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


def serve(
    settings: ServeSettings,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    drain_timeout: int | None = 600,
    log_level: str = "info",
) -> None:
    """Serve until SIGTERM/SIGINT, then drain and return."""
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        timeout_graceful_shutdown=drain_timeout,
        access_log=False,
        lifespan="on",
    )
    server = _DrainingServer(config, app.state.pacore)
    upstreams = ", ".join(settings.upstreams)
    print(
        f"pacore serve: models pacore-low|medium|high and pacore:K,.. over {settings.model} "
        f"at {upstreams}",
        file=sys.stderr,
        flush=True,
    )
    server.run()
