"""The lifecycle shared by the project's fake OpenAI-compatible servers.

:class:`~pacore_graph.testing.ScriptedServer` (answers from a script) and
:class:`~pacore_graph.testing.throughput_server.ThroughputServer` (answers at a
modelled GPU's pace) differ only in how they answer; binding a port, the
routes every OpenAI client expects, ``async with``, running on a private event
loop in a thread for sync code, and the ``READY <base_url>`` command line are
the same, so they live here once.
"""

from __future__ import annotations

import abc
import argparse
import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Self

from aiohttp import web

__all__ = [
    "LoopbackServer",
    "free_port",
    "serve_until_signalled",
    "server_arg_parser",
    "spawn_server",
]


class LoopbackServer(abc.ABC):
    """An aiohttp server on ``host:port`` (port 0 picks a free one) with the OpenAI routes.

    Subclasses answer ``POST /v1/chat/completions`` (:meth:`_chat`),
    ``GET /v1/models`` (:meth:`_models`) and ``GET /health`` + ``/v1/health``
    (:meth:`_health`), and may add routes in :meth:`_add_routes`.
    """

    #: cancel a request's handler when its client goes away (aiohttp's option)
    handler_cancellation: ClassVar[bool] = False

    def __init__(
        self, *, host: str, port: int, backlog: int, shutdown_timeout: float = 60.0
    ) -> None:
        self.host = host
        self.port = port
        self.backlog = backlog
        self.shutdown_timeout = shutdown_timeout
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ handlers

    @abc.abstractmethod
    async def _chat(self, request: web.Request) -> web.StreamResponse: ...

    @abc.abstractmethod
    async def _models(self, request: web.Request) -> web.StreamResponse: ...

    @abc.abstractmethod
    async def _health(self, request: web.Request) -> web.Response: ...

    def _add_routes(self, app: web.Application) -> None:
        """Routes beyond the OpenAI ones (none by default)."""
        return None  # a hook: nothing to do unless a subclass needs it

    def _on_start(self) -> None:
        """Called on the serving loop just before the socket is bound."""
        return None  # a hook: nothing to do unless a subclass needs it

    def _on_stop(self) -> None:
        """Called when serving stops, before in-flight requests are drained."""
        return None  # a hook: nothing to do unless a subclass needs it

    # ------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1``, what an OpenAI client takes as ``base_url``."""
        if self._runner is None:
            raise RuntimeError(f"{type(self).__name__} is not running")
        return f"http://{self.host}:{self.port}/v1"

    def make_app(self) -> web.Application:
        """The aiohttp application (exposed for embedding in another app)."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/health", self._health)
        self._add_routes(app)
        return app

    async def start(self) -> Self:
        """Bind and start accepting connections; ``self.port`` becomes the real port."""
        if self._runner is not None:
            raise RuntimeError(f"{type(self).__name__} already started")
        self._on_start()
        runner = web.AppRunner(
            self.make_app(),
            access_log=None,
            handle_signals=False,
            shutdown_timeout=self.shutdown_timeout,
            handler_cancellation=self.handler_cancellation,
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, backlog=self.backlog, reuse_address=True)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self.port = int(runner.addresses[0][1])
        self._runner = runner
        return self

    async def stop(self) -> None:
        """Stop serving; in-flight requests get ``shutdown_timeout`` seconds."""
        runner, self._runner = self._runner, None
        self._on_stop()
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def start_in_thread(self, timeout: float = 10.0) -> Self:
        """Run the server on its own event loop in a daemon thread (for sync code).

        Returns once the socket accepts connections; errors while binding are
        re-raised here rather than lost in the thread.
        """
        name = type(self).__name__
        if self._thread is not None:
            raise RuntimeError(f"{name} already running in a thread")
        ready = threading.Event()
        errors: list[BaseException] = []
        loop = asyncio.new_event_loop()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:  # handed to the caller below
                errors.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self.stop())
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.close()

        thread = threading.Thread(target=serve, name=f"{name}-thread", daemon=True)
        thread.start()
        if not ready.wait(timeout):
            raise TimeoutError(f"{name} did not start in time")
        if errors:
            thread.join()
            raise errors[0]
        self._thread, self._thread_loop = thread, loop
        return self

    def stop_thread(self, timeout: float = 10.0) -> None:
        """Stop a server started by :meth:`start_in_thread` and join its thread."""
        thread, loop = self._thread, self._thread_loop
        self._thread = self._thread_loop = None
        if thread is None or loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)

    @contextlib.contextmanager
    def run_in_thread(self) -> Iterator[Self]:
        """``with Server().run_in_thread() as srv:`` for sync tests and fixtures."""
        self.start_in_thread()
        try:
            yield self
        finally:
            self.stop_thread()


def free_port() -> int:
    """A loopback TCP port free now, for a server started by port number (not ``--port 0``).

    Another process could take it before the server binds; the servers here
    report their own port when given 0, so this is for third-party ones
    (``accelerate``'s rendezvous, ``pacore serve`` started by flags).
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_arg_parser(prog: str, description: str, model: str) -> argparse.ArgumentParser:
    """The command line every fake server takes (``--host --port --model --backlog``)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--model", default=model)
    parser.add_argument("--backlog", type=int, default=4096)
    return parser


async def serve_until_signalled(server: LoopbackServer) -> None:
    """Serve, print ``READY <base_url>`` for the parent process, stop on SIGTERM/SIGINT."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):  # Windows
            loop.add_signal_handler(sig, stop.set)
    async with server:
        sys.stdout.write(f"READY {server.base_url}\n")
        sys.stdout.flush()
        await stop.wait()


def spawn_server(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
) -> tuple[subprocess.Popen[str], str]:
    """Start a server process (``argv``) and wait for its ``READY <base_url>`` line.

    The parent side of :func:`serve_until_signalled`, for benchmarks and
    tests that want the server in its own process. Returns the process and the
    base URL; the caller terminates the process. A child that exits or prints
    anything else first is killed and reported with what it printed.
    """
    proc = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        text=True,
        env=None if env is None else dict(env),
        cwd=cwd,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("READY "):
        proc.kill()
        proc.wait()
        raise RuntimeError(f"{' '.join(argv[:3])} did not start: {line!r}")
    return proc, line.split()[1]
