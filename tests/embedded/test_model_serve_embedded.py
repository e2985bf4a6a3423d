"""``pacore model serve`` with no folder: the embedded model in the foreground, for any client."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import openai
import pytest
from embedded_support import require_embedded

pytestmark = pytest.mark.embedded


def _ctrl_c_default() -> None:
    """The server hears Ctrl-C even when this test runs where SIGINT is ignored.

    A shell starts background jobs with SIGINT ignored, and Python keeps an
    ignored SIGINT, so a suite run in the background (`bash .ci/run &`) would
    send a Ctrl-C nobody hears.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_model_serve() -> subprocess.Popen[str]:
    """``pacore model serve --port 0`` with no model settings from this environment."""
    require_embedded()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PACORE_"))}
    return subprocess.Popen(
        [sys.executable, "-m", "pacore_graph.cli", "model", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=_ctrl_c_default,
    )


def test_model_serve_without_a_folder_serves_the_embedded_model_to_the_openai_sdk() -> None:
    proc = start_model_serve()
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        fields = dict(part.split("=", 1) for part in line.split())
        assert fields["model"] == "smollm2-135m-instruct", line
        assert fields["base_url"].startswith("http://127.0.0.1:")
        assert not fields["base_url"].endswith(":0/v1")  # the bound port, not the asked 0

        client = openai.OpenAI(base_url=fields["base_url"], api_key="any", max_retries=0)
        assert [m.id for m in client.models.list()] == ["smollm2-135m-instruct"]
        response = client.chat.completions.create(
            model=fields["model"],
            messages=[{"role": "user", "content": "Name a colour."}],
            n=2,
            max_tokens=8,
        )
        assert len(response.choices) == 2
        assert all(c.message.content for c in response.choices)
        client.close()
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    assert "serving smollm2-135m-instruct at" in stderr
    assert "WARNING" not in stderr  # loopback: nothing to warn about


def test_ctrl_c_stops_the_server_while_a_client_holds_an_unfinished_request() -> None:
    """A request whose body never comes does not keep the server alive after Ctrl-C.

    aiohttp gives requests in flight 60 s by default; the server gives them
    ``SHUTDOWN_TIMEOUT_S``, so the process is gone well within the wait below.
    """
    proc = start_model_serve()
    try:
        assert proc.stdout is not None
        fields = dict(part.split("=", 1) for part in proc.stdout.readline().split())
        host, port = fields["base_url"].removeprefix("http://").removesuffix("/v1").split(":")
        with socket.create_connection((host, int(port))) as held:
            held.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
            )
            time.sleep(0.5)  # the handler is now waiting for the rest of the body
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
