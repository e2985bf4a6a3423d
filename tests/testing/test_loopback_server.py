"""The lifecycle every fake server shares: bind, the OpenAI routes, threads, a child process.

A minimal subclass answers by input (its routes echo what they were asked),
so each test sees the base class's work alone: the port it bound, the
routes it mounted, hooks called in order, errors raised where the caller
can see them, and the ``READY <base_url>`` handshake of a child process.
"""

from __future__ import annotations

import socket
import sys
import urllib.request
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from pacore_graph.testing.loopback_server import LoopbackServer, server_arg_parser, spawn_server


class EchoServer(LoopbackServer):
    """Answers each route with its name and the request's model, and logs its hooks."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("host", "127.0.0.1")
        kwargs.setdefault("port", 0)
        kwargs.setdefault("backlog", 16)
        super().__init__(**kwargs)
        self.hooks: list[str] = []

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        return web.json_response({"route": "chat", "model": body.get("model")})

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"route": "models"})

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"route": "health", "path": request.path})

    def _add_routes(self, app: web.Application) -> None:
        app.router.add_get("/extra", self._models)

    def _on_start(self) -> None:
        self.hooks.append("start")

    def _on_stop(self) -> None:
        self.hooks.append("stop")


async def get(url: str) -> Any:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        assert resp.status == 200, url
        return await resp.json()


async def test_the_openai_routes_and_the_extra_ones_are_mounted() -> None:
    async with EchoServer() as server:
        root = server.base_url.removesuffix("/v1")
        async with aiohttp.ClientSession() as session:
            chat = await session.post(f"{server.base_url}/chat/completions", json={"model": "m"})
            assert await chat.json() == {"route": "chat", "model": "m"}
        assert (await get(f"{server.base_url}/models"))["route"] == "models"
        for path in ("/health", "/v1/health"):
            assert await get(f"{root}{path}") == {"route": "health", "path": path}
        assert (await get(f"{root}/extra"))["route"] == "models"


async def test_port_zero_becomes_the_bound_port_and_hooks_run_in_order() -> None:
    server = EchoServer()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url
    async with server:
        assert server.port != 0
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        with pytest.raises(RuntimeError, match="already started"):
            await server.start()
    assert server.hooks == ["start", "stop"]
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url


async def test_a_port_in_use_fails_at_start_and_leaves_nothing_running() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = EchoServer(port=taken.getsockname()[1])
        with pytest.raises(OSError):
            await server.start()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url


def test_in_a_thread_for_sync_code() -> None:
    with EchoServer().run_in_thread() as server:
        with urllib.request.urlopen(f"{server.base_url}/models", timeout=30) as resp:
            assert resp.status == 200
        with pytest.raises(RuntimeError, match="already running in a thread"):
            server.start_in_thread()
    assert server.hooks == ["start", "stop"]


def test_a_bind_error_in_the_thread_is_raised_to_the_caller() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            EchoServer(port=taken.getsockname()[1]).start_in_thread()


def test_the_command_line_every_fake_server_takes() -> None:
    args = server_arg_parser("prog", "desc", model="the-model").parse_args([])
    assert (args.host, args.port, args.model) == ("127.0.0.1", 0, "the-model")
    assert server_arg_parser("p", "d", "m").parse_args(["--port", "9"]).port == 9


def test_spawn_server_waits_for_ready_and_reports_a_child_that_is_not() -> None:
    proc, url = spawn_server(
        [sys.executable, "-m", "pacore_graph.testing.scripted_server", "--port", "0"]
    )
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        with urllib.request.urlopen(f"{url}/models", timeout=30) as resp:
            assert resp.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    with pytest.raises(RuntimeError, match="did not start: 'hello'"):
        spawn_server([sys.executable, "-c", "print('hello')"])
