"""``pacore serve`` against a hostile caller, over real sockets to a real ``pacore serve``.

The server runs as a subprocess with its real uvicorn configuration (the
connection limit and the header deadline live there), small limits and short
timeouts. Each attack asserts what the limit caused -- the status, the
closed connection, the untouched upstream -- never how long it took. The
guard rails at start-up and the errors sent to clients are tested here too.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_support import free_port, running_serve

from pacore_graph.cli import main
from pacore_graph.serve import ServeSettings
from pacore_graph.settings.config import ModelRetryPolicy
from pacore_graph.testing import ScriptedServer

MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]
OK_BODY = {"model": "pacore:1", "messages": MESSAGES}
MAX_BODY = 256 * 1024


@dataclass
class Served:
    host: str
    port: int
    log: Path
    upstream: ScriptedServer

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def _start(upstream: ScriptedServer, log: Path, *flags: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PACORE_SERVE_API_KEY"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pacore_graph.cli",
                "serve",
                "--upstream",
                upstream.base_url,
                "--model",
                "scripted",
                "--port",
                str(port),
                "--retries",
                "1",
                "--log-level",
                "info",
                *flags,
            ],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc, port
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"pacore serve did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedServer]:
    with ScriptedServer().run_in_thread() as srv:
        yield srv


@pytest.fixture(scope="module")
def served(upstream: ScriptedServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A keyless loopback server (the case a web page on this machine could reach)."""
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    proc, port = _start(
        upstream,
        log,
        "--max-body-bytes",
        str(MAX_BODY),
        "--header-timeout",
        "2",
        "--body-timeout",
        "2",
    )
    try:
        yield Served("127.0.0.1", port, log, upstream)
    finally:
        _stop(proc)


@pytest.fixture
def quiet_upstream(served: Served) -> Iterator[ScriptedServer]:
    """The upstream, asserted untouched by the test."""
    before = served.upstream.request_count
    yield served.upstream
    assert served.upstream.request_count == before


def raw(served: Served, head: bytes, body: bytes = b"", *, timeout: float = 30) -> socket.socket:
    sock = socket.create_connection((served.host, served.port), timeout=timeout)
    sock.sendall(head + body)
    return sock


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    with sock:
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def post_head(length: int | None, content_type: str = "application/json") -> bytes:
    lines = [
        "POST /v1/chat/completions HTTP/1.1",
        "Host: 127.0.0.1",
        f"Content-Type: {content_type}",
    ]
    lines.append(
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    )
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


# ------------------------------------------------------------------ content type


@pytest.mark.usefixtures("quiet_upstream")
@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
def test_only_json_bodies_start_runs(served: Served, content_type: str | None) -> None:
    """A cross-origin page can POST text/plain or a form without a preflight: 415."""
    headers = {} if content_type is None else {"Content-Type": content_type}
    resp = httpx.post(
        f"{served.url}/v1/chat/completions",
        content=json.dumps(OK_BODY).encode(),
        headers=headers,
        timeout=30,
    )
    assert resp.status_code == 415, resp.text
    assert "application/json" in resp.json()["error"]["message"]


def test_json_with_a_charset_is_json(served: Served) -> None:
    resp = httpx.post(
        f"{served.url}/v1/chat/completions",
        content=json.dumps(OK_BODY).encode(),
        headers={"Content-Type": "Application/JSON; charset=utf-8"},
        timeout=60,
    )
    assert resp.status_code == 200, resp.text


# ------------------------------------------------------------------ body size and depth


def nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.usefixtures("quiet_upstream")
def test_a_body_announced_too_large_is_413_before_it_is_sent(served: Served) -> None:
    sock = raw(served, post_head(50_000_000))  # 50 MB announced, not one byte sent
    response = read_all(sock)
    assert status_of(response) == 413
    assert b"larger than 262144 bytes" in response


@pytest.mark.usefixtures("quiet_upstream")
def test_a_chunked_body_is_cut_off_at_the_cap(served: Served) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"model": "pacore:1", "messages": [{"role": "user", "content": "'
        for _ in range(64):
            yield b"x" * 65536  # 4 MiB in all, 16 times the cap
        yield b'"}]}'

    resp = httpx.post(
        f"{served.url}/v1/chat/completions",
        content=chunks(),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert resp.status_code == 413, resp.text


@pytest.mark.usefixtures("quiet_upstream")
@pytest.mark.parametrize(
    "body",
    [
        "[" * 100_000 + "]" * 100_000,
        json.dumps({**OK_BODY, "metadata": None})[:-1]
        + ', "x": '
        + '{"a": ' * 1000
        + "1"
        + "}" * 1001,
        json.dumps({"model": "pacore:1", "messages": [{"role": "user", "content": nested(40)}]}),
    ],
    ids=["list-100000", "object-1000", "content-40"],
)
def test_deeply_nested_json_is_400_without_a_traceback(served: Served, body: str) -> None:
    resp = httpx.post(
        f"{served.url}/v1/chat/completions",
        content=body.encode(),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert resp.status_code == 400, resp.text
    assert "nested deeper than 32" in resp.json()["error"]["message"]
    log = served.log_text()
    assert "Traceback" not in log and "RecursionError" not in log


# ------------------------------------------------------------------ slow clients


@pytest.mark.usefixtures("quiet_upstream")
def test_a_slow_body_gets_408_and_the_connection_is_closed(served: Served) -> None:
    sock = raw(served, post_head(100), b'{"model": ')  # then nothing more
    response = read_all(sock)  # returns only because the server closed the connection
    assert status_of(response) == 408
    assert b"not received within 2 s" in response


@pytest.mark.usefixtures("quiet_upstream")
def test_slow_headers_are_dropped(served: Served) -> None:
    """A slow-loris connection that never finishes its headers is closed by the server."""
    sock = raw(served, b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    assert read_all(sock) == b""  # closed, nothing answered


@pytest.mark.usefixtures("quiet_upstream")
def test_an_idle_keep_alive_connection_is_dropped_too(served: Served) -> None:
    sock = raw(served, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /hea")
    response = read_all(sock)  # the first answer, then the half-sent second request is dropped
    assert response.startswith(b"HTTP/1.1 200") and response.count(b"HTTP/1.1") == 1


def test_the_connection_limit_answers_503(upstream: ScriptedServer, tmp_path: Path) -> None:
    proc, port = _start(upstream, tmp_path / "serve.log", "--max-connections", "4")
    held: list[socket.socket] = []
    try:
        for _ in range(4):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=30))
        resp = httpx.get(f"http://127.0.0.1:{port}/health", timeout=30)
        assert resp.status_code == 503
        for sock in held:
            sock.close()
        held.clear()
        deadline = time.monotonic() + 30
        while httpx.get(f"http://127.0.0.1:{port}/health", timeout=30).status_code != 200:
            assert time.monotonic() < deadline, "the server did not recover"
            time.sleep(0.1)
    finally:
        for sock in held:
            sock.close()
        _stop(proc)


# ------------------------------------------------------------------ guard rails at start


def test_upstream_credentials_are_refused_without_echoing_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["serve", "--model", "m", "--upstream", "http://ok:1/v1"]
    assert main([*argv, "--upstream", "http://user:hunter2@127.0.0.1:1/v1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pacore: error: --upstream #1 must not carry credentials")
    assert "hunter2" not in err and err.count("\n") == 1


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What ``serve`` would have been started with (binding off loopback is not done here)."""
    import pacore_graph.serve as serve_package

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(serve_package, "serve", lambda settings, **kw: calls.append(kw))
    monkeypatch.delenv("PACORE_SERVE_API_KEY", raising=False)
    return calls


def test_a_host_off_loopback_needs_a_key_or_allow_no_auth(
    started: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["serve", "--upstream", "http://127.0.0.1:1/v1", "--model", "m"]
    for host in ("0.0.0.0", "::", "192.168.1.20", "my-host"):
        assert main([*argv, "--host", host]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"pacore: error: --host {host} is reachable from other machines")
        assert "--allow-no-auth" in err
    assert started == []
    assert main([*argv, "--host", "0.0.0.0", "--allow-no-auth"]) == 0
    assert "WARNING: serving on 0.0.0.0 WITHOUT AUTHENTICATION" in capsys.readouterr().err
    assert main([*argv, "--host", "0.0.0.0", "--api-key", "k"]) == 0
    for host in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        assert main([*argv, "--host", host]) == 0
    assert "WARNING" not in capsys.readouterr().err
    assert [c["host"] for c in started] == [
        "0.0.0.0",
        "0.0.0.0",
        "127.0.0.1",
        "127.0.0.2",
        "::1",
        "localhost",
    ]


# ------------------------------------------------------------------ what clients are told

SECRET = "sk-live-TOPSECRET-4242"
INTERNAL = "http://internal.example:8443/admin"


class _Leaky(http.server.BaseHTTPRequestHandler):
    """An upstream whose errors quote a secret and an internal URL."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"error": {"message": f"key {SECRET} rejected by {INTERNAL}"}}).encode()
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def leaky() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Leaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("stream", [False, True])
def test_errors_sent_to_clients_never_quote_the_upstream(leaky: str, stream: bool) -> None:
    fast = ModelRetryPolicy(max_attempts=2, initial_backoff=0.001, max_backoff=0.01)
    settings = ServeSettings(upstreams=(leaky,), model="m", retry=fast)
    with running_serve(settings) as srv:
        resp = httpx.post(
            f"{srv.base_url}/chat/completions",
            json={"model": "pacore:2", "messages": MESSAGES, "stream": stream},
            timeout=60,
        )
    text = resp.text
    assert ("round 0: all 2 explorer calls" in text) and ("failed" in text)
    if not stream:
        assert resp.status_code == 502
    for leaked in (SECRET, "internal.example", leaky.split("//")[1].split("/")[0], "/v1"):
        assert leaked not in text, leaked
