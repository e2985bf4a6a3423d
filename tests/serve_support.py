"""``pacore serve``'s app under a real uvicorn in a background thread, for tests.

The thread has its own event loop, so sync clients (the ``openai`` SDK,
``ChatOpenAI``) and async ones (in pytest's loop) both talk to it over real
HTTP on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

from pacore_graph.serve import ServeSettings, ServeState, create_app
from pacore_graph.serve.server import uvicorn_config
from pacore_graph.testing.loopback_server import free_port


@dataclass
class RunningServe:
    base_url: str
    state: ServeState
    server: uvicorn.Server


def serve_settings(*upstreams: Any, **overrides: Any) -> ServeSettings:
    """Settings of a server over ``upstreams`` (test servers with a ``base_url``) serving
    their model ``scripted``; ``overrides`` are any other ServeSettings fields."""
    fields: dict[str, Any] = {
        "upstreams": tuple(u.base_url for u in upstreams),
        "model": "scripted",
    }
    return ServeSettings(**{**fields, **overrides})


@contextmanager
def running_serve(settings: ServeSettings, **app_kwargs: Any) -> Iterator[RunningServe]:
    app = create_app(settings, **app_kwargs)
    port = free_port()
    # The real server's configuration (connection limits, header deadline).
    config = uvicorn_config(app, settings, port=port, log_level="warning")
    server = uvicorn.Server(config)
    # uvicorn leaves signals alone off the main thread; should_exit stops it.
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("pacore serve did not start")
        time.sleep(0.01)
    try:
        yield RunningServe(f"http://127.0.0.1:{port}/v1", app.state.pacore, server)
    finally:
        server.should_exit = True
        thread.join(15)


@dataclass
class ServeProcess:
    """A ``pacore serve`` command running as its own process, answering on ``base``."""

    proc: subprocess.Popen[str]
    base: str

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM (the server drains), then the exit status."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def stderr(self) -> str:
        return self.proc.stderr.read() if self.proc.stderr else ""


@contextmanager
def serve_process(
    *args: str, env: dict[str, str] | None = None, start_s: float = 60
) -> Iterator[ServeProcess]:
    """``python -m pacore_graph.cli serve ARGS --port P`` until ``/health`` answers 200.

    Killed on the way out if the test did not stop it.
    """
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pacore_graph.cli", "serve", *args, "--port", str(port)],
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    running = ServeProcess(proc, f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + start_s
        while True:
            try:
                if httpx.get(f"{running.base}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, running.stderr()
            assert time.monotonic() < deadline, "pacore serve did not start"
            time.sleep(0.1)
        yield running
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
