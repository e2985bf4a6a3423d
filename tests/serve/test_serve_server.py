"""serve/server: uvicorn set up with the server's limits, and the request-header deadline.

The deadline is tested on a real uvicorn over a loopback socket with a
trivial ASGI app: a client that sends a whole request is answered, one that
stops halfway through its headers has its connection closed by the server
(what is asserted is the close, not how long it took).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from pacore_graph.serve.server import (
    MAX_REQUEST_HEAD_BYTES,
    header_deadline_protocol,
    is_loopback,
    uvicorn_config,
)
from pacore_graph.serve.settings import ServeSettings

SETTINGS = ServeSettings(
    upstreams=("http://127.0.0.1:9/v1",),
    model="m",
    max_connections=7,
    header_timeout_s=0.2,
    keep_alive_s=3.4,
)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("localhost", True),
        (" LocalHost ", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.2", False),
        ("example.com", False),  # a name may resolve to anything
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def test_the_config_takes_the_servers_limits() -> None:
    config = uvicorn_config(app, SETTINGS, host="127.0.0.1", port=0, drain_timeout=5)
    assert config.limit_concurrency == 7
    assert config.timeout_keep_alive == 3  # whole seconds, at least 1
    assert config.timeout_graceful_shutdown == 5
    assert config.h11_max_incomplete_event_size == MAX_REQUEST_HEAD_BYTES
    assert config.access_log is False
    assert isinstance(config.http, type) and config.http.header_timeout_s == 0.2  # type: ignore[union-attr]


def test_each_deadline_is_its_own_protocol_class() -> None:
    short, long = header_deadline_protocol(1.0), header_deadline_protocol(30.0)
    assert short is not long
    assert (short.header_timeout_s, long.header_timeout_s) == (1.0, 30.0)  # type: ignore[attr-defined]


@pytest.fixture
def running() -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn_config(app, SETTINGS, port=0, log_level="error"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        for _ in range(1000):
            if server.started:
                break
            threading.Event().wait(0.01)
        assert server.started
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def read_all(conn: socket.socket) -> bytes:
    data = b""
    while chunk := conn.recv(4096):
        data += chunk
    return data


def test_a_whole_request_is_answered(running: int) -> None:
    with socket.create_connection(("127.0.0.1", running), timeout=10) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert read_all(conn).startswith(b"HTTP/1.1 200")


def test_headers_never_finished_get_the_connection_closed(running: int) -> None:
    with socket.create_connection(("127.0.0.1", running), timeout=10) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # no blank line: headers unfinished
        assert read_all(conn) == b""  # closed by the server, nothing answered
