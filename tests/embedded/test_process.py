"""The embedded server's child process: its lifecycle and its OpenAI basics.

Tests marked ``embedded`` run the real SmolLM2 model through our server over
the cyllama engine; they are skipped only when the ``[embedded]`` extra or
the weights are not installed (CI installs both and refuses to skip).  One
server is shared by the module to keep the file fast.  Batching, ``n``,
streaming and bad requests: ``test_embedded_app.py``; finding the weights:
``test_weights.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest
from embedded_support import require_embedded

from pacore_graph.embedded import (
    DEFAULT_MODEL_ALIAS,
    EmbeddedServer,
    EmbeddedServerError,
)


def _require_extra() -> None:
    require_embedded()


def _client(server: EmbeddedServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=server.api_key, max_retries=0)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _port_free(port: int) -> bool:
    """Nothing listens on the port and a new server could bind it.

    SO_REUSEADDR as every server sets it (uvicorn included): the closed
    connections of the stopped server legitimately linger in TIME_WAIT.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(2.0)
        try:
            probe.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            pass
        else:
            return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedServer]:
    _require_extra()
    with EmbeddedServer() as running:
        yield running


@pytest.fixture
def logs_in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put the server logs in tmp_path, so logs kept after a failed start are cleaned up."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


# -- against the real model -------------------------------------------------


@pytest.mark.embedded
def test_server_answers_a_chat_completion_with_real_token_counts(
    server: EmbeddedServer,
) -> None:
    assert server.running
    assert server.base_url == f"http://127.0.0.1:{server.bound_port}/v1"
    assert server.model == DEFAULT_MODEL_ALIAS
    client = _client(server)

    assert [m.id for m in client.models.list()] == [DEFAULT_MODEL_ALIAS]
    response = client.chat.completions.create(
        model=server.model,
        messages=[{"role": "user", "content": "Name a colour."}],
        max_tokens=32,
        temperature=0.0,
    )

    assert response.choices[0].message.content
    assert response.choices[0].message.content.strip()
    assert response.usage is not None
    assert response.usage.prompt_tokens > 0
    assert 0 < response.usage.completion_tokens <= 32
    assert response.model == DEFAULT_MODEL_ALIAS


@pytest.mark.embedded
def test_finish_reason_is_length_when_max_tokens_is_hit(server: EmbeddedServer) -> None:
    response = _client(server).chat.completions.create(
        model=server.model,
        messages=[{"role": "user", "content": "Write a long story about a lighthouse."}],
        max_tokens=4,
        temperature=0.0,
    )

    assert response.choices[0].finish_reason == "length"
    assert response.usage is not None
    assert response.usage.completion_tokens == 4


@pytest.mark.embedded
def test_concurrent_requests_all_succeed(server: EmbeddedServer) -> None:
    """Concurrent requests are decoded together, none fails or interrupts another."""

    def ask(i: int) -> Any:
        return _client(server).chat.completions.create(
            model=server.model,
            messages=[{"role": "user", "content": f"Write a poem about the number {i}."}],
            max_tokens=8,
            temperature=1.0,
        )

    with ThreadPoolExecutor(max_workers=4) as pool:
        responses = list(pool.map(ask, range(4)))

    assert len(responses) == 4
    for response in responses:
        assert response.choices[0].message.content
        assert response.usage.completion_tokens > 0


@pytest.mark.embedded
def test_stop_ends_the_process_and_frees_the_port(logs_in_tmp: Path) -> None:
    _require_extra()
    embedded = EmbeddedServer(startup_timeout=60.0)
    embedded.start()
    pid, port, log_path = embedded.pid, embedded.bound_port, embedded.log_path
    assert _pid_alive(pid)
    assert log_path.is_file()

    embedded.stop()

    assert not embedded.running
    assert not _pid_alive(pid)
    assert _port_free(port)
    assert not log_path.exists()
    with pytest.raises(EmbeddedServerError, match="not running"):
        _ = embedded.base_url
    embedded.stop()  # idempotent


_ORPHAN_SCRIPT = """
import sys, time
from pacore_graph.embedded import EmbeddedServer
server = EmbeddedServer().start()
print(server.pid, server.log_path, flush=True)
time.sleep(120)
"""


def _gone_or_zombie(pid: int) -> bool:
    """Dead, counting an exited child that its new parent (PID 1) has not reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


@pytest.mark.embedded
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_server_dies_with_a_killed_parent(tmp_path: Path) -> None:
    """SIGKILL skips atexit and finalizers: the child must notice on its own."""
    _require_extra()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TMPDIR=str(tmp_path))
    parent = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN_SCRIPT], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert parent.stdout is not None
        pid_text, log_text = parent.stdout.readline().split()
        child = int(pid_text)
        assert _pid_alive(child)
    finally:
        parent.kill()
        parent.wait()

    deadline = time.monotonic() + 10.0
    while not _gone_or_zombie(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone_or_zombie(child)
    deadline = time.monotonic() + 5.0
    while Path(log_text).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(log_text).exists()


@pytest.mark.embedded
def test_async_context_manager_does_not_block_the_event_loop() -> None:
    _require_extra()

    async def main() -> tuple[int, int, str]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.create_task(tick())
        async with EmbeddedServer() as embedded:
            ticks_during_start, pid = ticks, embedded.pid
            models = await openai.AsyncOpenAI(
                base_url=embedded.base_url, api_key=embedded.api_key
            ).models.list()
        ticker.cancel()
        return ticks_during_start, pid, models.data[0].id

    ticks_during_start, pid, model_id = asyncio.run(main())

    assert ticks_during_start > 5
    assert model_id == DEFAULT_MODEL_ALIAS
    assert not _pid_alive(pid)


@pytest.mark.embedded
def test_startup_failure_raises_promptly_with_the_server_log(
    logs_in_tmp: Path, tmp_path: Path
) -> None:
    pytest.importorskip("cyllama")
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"this is not a GGUF file")
    embedded = EmbeddedServer(model_path=bogus, startup_timeout=60.0)

    with pytest.raises(EmbeddedServerError) as caught:
        embedded.start()

    message = str(caught.value)
    # Promptly: the start noticed the server's exit, not its 60 s startup timeout.
    assert "exited with code" in message and "did not answer" not in message
    assert "Failed to load model" in message  # from the server's own log
    assert str(bogus) in message
    assert not embedded.running


# -- no model needed --------------------------------------------------------


def test_missing_model_file_is_reported_before_spawning(tmp_path: Path) -> None:
    embedded = EmbeddedServer(model_path=tmp_path / "absent.gguf")
    with pytest.raises(EmbeddedServerError):
        embedded.start()
    assert not embedded.running


def test_start_without_the_engine_names_the_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, package=None: None if name == "cyllama" else real_find_spec(name, package),
    )
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF")

    with pytest.raises(EmbeddedServerError, match=r"cyllama.*pacore-graph\[embedded\]"):
        EmbeddedServer(model_path=model).start()


def test_config_is_validated_and_frozen(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="port"):
        EmbeddedServer(port=70000)
    with pytest.raises(ValueError, match="n_ctx"):
        EmbeddedServer(n_ctx=0)
    with pytest.raises(ValueError, match="n_threads"):
        EmbeddedServer(n_threads=0)
    with pytest.raises(ValueError, match="startup_timeout"):
        EmbeddedServer(startup_timeout=0)
    with pytest.raises(ValueError, match="max_sequences"):
        EmbeddedServer(max_sequences=0)
    with pytest.raises(ValueError, match="kv_tokens"):
        EmbeddedServer(n_ctx=2048, kv_tokens=1024)
    with pytest.raises(TypeError, match="extra_args"):
        EmbeddedServer(extra_args="--kv_tokens 4096")

    embedded = EmbeddedServer(model_path=tmp_path / "m.gguf", extra_args=["--kv_tokens", "1"])
    assert embedded.extra_args == ("--kv_tokens", "1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        embedded.port = 1234  # type: ignore[misc]
    with pytest.raises(EmbeddedServerError, match="not running"):
        _ = embedded.base_url


def test_server_args_carry_the_settings_parallel_explorers_need(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    embedded = EmbeddedServer(
        model_path=model,
        n_ctx=4096,
        n_threads=3,
        model_alias="tiny",
        max_sequences=8,
        extra_args=["--kv_tokens", "9000"],
    )

    args = embedded.server_args(port=8123)

    pairs = dict(zip(args[::2], args[1::2], strict=True))
    assert pairs == {
        "--model": str(model),
        "--model_alias": "tiny",
        "--host": "127.0.0.1",
        "--port": "8123",
        "--n_ctx": "4096",
        "--n_threads": "3",
        "--max_sequences": "8",
        "--kv_tokens": "9000",  # the extra args' value: they come last, so they win
    }
    assert args[-2:] == ["--kv_tokens", "9000"]
    # By default the KV cache holds half of every sequence slot at full length.
    assert EmbeddedServer(model_path=model, n_ctx=1000, max_sequences=8).kv_budget == 4000
