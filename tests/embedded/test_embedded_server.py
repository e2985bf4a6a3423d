"""Running the embedded server: the child's command line, its ready line, its one-line failures.

The model is the packaged SmolLM2 on the real engine (tests marked
``embedded``); what each test checks is what the server did: the URL it
reported, what it then served, the exit status and the line it printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from embedded_support import require_embedded

from pacore_graph.embedded import find_default_model
from pacore_graph.embedded.server import EngineOptions, main, serve_embedded

pytestmark = pytest.mark.embedded


def options(alias: str = "tiny-alias") -> EngineOptions:
    return EngineOptions(
        model_path=find_default_model(),
        model_alias=alias,
        n_ctx=256,
        max_sequences=2,
        kv_tokens=512,
        n_threads=1,
    )


def test_a_model_that_fails_to_load_is_one_line_and_status_1(tmp_path: Path) -> None:
    pytest.importorskip("cyllama")
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"this is not a GGUF file")
    done = subprocess.run(
        [sys.executable, "-m", "pacore_graph.embedded.server", "--model", str(bogus),
         "--model_alias", "x", "--port", "0"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith(f"Failed to load model from {bogus}")
    assert "Traceback" not in done.stderr and "ready" not in done.stdout


async def test_serving_reports_a_connectable_url_and_serves_the_alias() -> None:
    require_embedded()
    ready: asyncio.Queue[str] = asyncio.Queue()
    chosen = options("the-alias")
    task = asyncio.create_task(serve_embedded(chosen, "0.0.0.0", 0, ready.put_nowait))
    try:
        url = await asyncio.wait_for(ready.get(), timeout=300)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")  # not 0.0.0.0
        async with aiohttp.ClientSession() as session, session.get(f"{url}/models") as resp:
            models = await resp.json()  # over HTTP on this loop (a blocking call would stall it)
        assert [m["id"] for m in models["data"]] == [chosen.model_alias]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert task.cancelled()


def test_a_taken_port_is_one_line_and_status_1(capsys: pytest.CaptureFixture[str]) -> None:
    require_embedded()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status = main(
            ["--model", str(find_default_model()), "--model_alias", "x", "--port", str(port),
             "--n_ctx", "256", "--max_sequences", "1", "--kv_tokens", "256", "--n_threads", "1"]
        )  # fmt: skip
    assert status == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"could not bind 127.0.0.1:{port}:") and "\n" not in err
