"""``langgraph dev`` serves langgraph.json's PaCoRe graph; a client calls it over HTTP.

The LangGraph CLI's in-memory server runs as a subprocess on loopback,
pointed (through ``PACORE_*`` variables) at the scripted model server. A run
with ``context={"rounds": [3]}`` must reach the upstream as
3 samples then 1, the assistant must publish input and output schemas (the
form LangGraph Studio draws) and the context schema with every per-run
setting's type, bounds and default, and the server log must not warn about
unregistered checkpoint types.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pacore_graph.settings.fields import SETTINGS
from pacore_graph.settings.per_run import RUN_SETTINGS
from pacore_graph.settings.presets import PRESETS
from pacore_graph.settings.request_limits import RequestLimits
from pacore_graph.testing import ScriptedServer

REPO_ROOT = Path(__file__).resolve().parents[2]
PRESETS_BY_ROUNDS = {tuple(rounds): name for name, rounds in PRESETS.items()}
LANGGRAPH = Path(sys.executable).with_name("langgraph")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _call(url: str, body: Any = None, timeout: float = 60) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        url,
        data=data,
        headers={"Content-Type": "application/json"},
        method="POST" if data else "GET",
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    with ScriptedServer(model="served").run_in_thread() as srv:
        yield srv


@pytest.fixture
def dev_server(upstream: ScriptedServer, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    if not LANGGRAPH.exists() and shutil.which("langgraph") is None:
        pytest.fail("langgraph-cli[inmem] is not installed (it is in the dev extra)")
    port = _free_port()
    log = tmp_path / "langgraph-dev.log"
    env = {
        **os.environ,
        "PACORE_BASE_URL": upstream.base_url,
        "PACORE_MODEL": "served",
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    }
    with log.open("w") as out:
        proc = subprocess.Popen(
            [
                str(LANGGRAPH if LANGGRAPH.exists() else "langgraph"),
                "dev",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-browser",
                "--no-reload",
                "--config",
                str(REPO_ROOT / "langgraph.json"),
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                _call(f"{base}/ok", timeout=2)
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        f"langgraph dev did not start:\n{log.read_text()[-3000:]}"
                    ) from None
                time.sleep(0.5)
        yield base, log
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def assert_types_bounds_and_defaults(context: dict[str, Any]) -> None:
    """Every per-run setting's type, bounds (the server's caps too) and default, as published."""
    json_type = {int: "integer", float: "number", str: "string"}
    keyword = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum"}
    limits = RequestLimits()
    for name in RUN_SETTINGS:
        row = SETTINGS[name]
        (given,) = [t for t in context[name]["anyOf"] if t.get("type") != "null"]
        assert {"type": "null"} in context[name]["anyOf"], name  # optional: unset keeps it
        if name == "rounds":
            assert given["type"] == "array"
            assert given["items"] == {"type": "integer", "minimum": 1}
            assert given["maxItems"] == limits.max_rounds
            assert context[name]["default"] == list(row.default)
            continue
        assert given["type"] == json_type[row.kind], name
        expected = {keyword[k]: v for k, v in row.bounds().items()}
        if name == "max_tokens":
            expected["maximum"] = limits.max_tokens_cap
        assert {k: given[k] for k in expected} == expected, name
        if row.choices is not None:
            assert given["enum"] == list(row.choices), name
        # The served graph's own value (the catalogue's default; preset: the
        # preset those rounds are).
        want = (
            PRESETS_BY_ROUNDS.get(tuple(SETTINGS["rounds"].default))
            if name == "preset"
            else (row.default)
        )
        assert context[name]["default"] == want, name


def test_served_graph_takes_rounds_per_request_and_publishes_schemas(
    dev_server: tuple[str, Path], upstream: ScriptedServer
) -> None:
    base, log = dev_server
    (assistant,) = _call(f"{base}/assistants/search", {"graph_id": "pacore"})
    schemas = _call(f"{base}/assistants/{assistant['assistant_id']}/schemas")
    assert schemas["input_schema"] is not None
    assert "messages" in schemas["input_schema"]["properties"]
    assert schemas["output_schema"] is not None
    assert {"answer", "result"} <= set(schemas["output_schema"]["properties"])
    # The per-run settings, discoverable: the catalogue's keys with help, bounds and the
    # served graph's own values as defaults.
    context = schemas["context_schema"]["properties"]
    assert tuple(context) == RUN_SETTINGS
    assert all(context[name]["description"] == SETTINGS[name].help for name in RUN_SETTINGS)
    assert context["rounds"]["default"] == list(PRESETS["low"])
    top_p = next(t for t in context["top_p"]["anyOf"] if t.get("type") == "number")
    assert (top_p["exclusiveMinimum"], top_p["maximum"]) == (
        SETTINGS["top_p"].gt,
        SETTINGS["top_p"].le,
    )
    assert_types_bounds_and_defaults(context)
    # The config schema is not empty: LangGraph publishes the context schema under
    # that name too (docs/serve.md says so), for clients that predate the run's context.
    assert schemas["config_schema"] == schemas["context_schema"]

    thread = _call(f"{base}/threads", {})
    out = _call(
        f"{base}/threads/{thread['thread_id']}/runs/wait",
        {
            "assistant_id": "pacore",
            "input": {"messages": [{"role": "user", "content": "What is 2 + 2?"}]},
            "context": {"rounds": [3]},
        },
        timeout=120,
    )
    assert out["answer"]
    samples = [int(r.body.get("n", 1)) for r in upstream.requests]
    assert samples == [3, 1]
    # The deprecated configurable still reaches the run (for one release).
    upstream.requests.clear()
    legacy = _call(f"{base}/threads", {})
    _call(
        f"{base}/threads/{legacy['thread_id']}/runs/wait",
        {
            "assistant_id": "pacore",
            "input": {"messages": [{"role": "user", "content": "What is 3 + 3?"}]},
            "config": {"configurable": {"rounds": [2]}},
        },
        timeout=120,
    )
    assert [int(r.body.get("n", 1)) for r in upstream.requests] == [2, 1]
    # Read the thread's checkpointed state back (it holds PaCoRe's records).
    state = _call(f"{base}/threads/{thread['thread_id']}/state")
    assert state["values"]["answer"] == out["answer"]
    assert "unregistered type" not in log.read_text()


def test_a_request_cannot_import_code_on_the_served_graph(
    dev_server: tuple[str, Path], upstream: ScriptedServer
) -> None:
    """``module:attr`` as a run's compactor killed, froze or wrote into this server once."""
    base, log = dev_server
    for spec in ("os:abort", "sys:exit", "signal:pause", "this:x", "faulthandler:dump_traceback"):
        thread = _call(f"{base}/threads", {})
        try:
            out = _call(
                f"{base}/threads/{thread['thread_id']}/runs/wait",
                {
                    "assistant_id": "pacore",
                    "input": {"messages": [{"role": "user", "content": "What is 2 + 2?"}]},
                    "context": {"compactor": spec},
                },
                timeout=60,
            )
            text = json.dumps(out)
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
        assert "context.compactor" in text and "not offered" in text, text[-2000:]
        assert _call(f"{base}/ok", timeout=10)  # alive, its event loop not frozen
    # Sent the deprecated way: langgraph-api copies configurable into the run's context,
    # so the graph reads (and names) them as context.
    for configurable, field in (
        ({"rounds": [1024] * 16}, "context.rounds"),
        ({"max_tokens": 10**9}, "context.max_tokens"),
    ):
        thread = _call(f"{base}/threads", {})
        try:
            text = json.dumps(
                _call(
                    f"{base}/threads/{thread['thread_id']}/runs/wait",
                    {
                        "assistant_id": "pacore",
                        "input": {"messages": [{"role": "user", "content": "What is 2 + 2?"}]},
                        "config": {"configurable": configurable},
                    },
                    timeout=60,
                )
            )
        except urllib.error.HTTPError as exc:
            text = exc.read().decode(errors="replace")
        assert field in text, text[-2000:]
    assert upstream.requests == []
    written = log.read_text()
    assert "Beautiful is better than ugly" not in written  # `this` was never imported
    assert "Current thread" not in written and "Thread 0x" not in written  # no dump
    # The server still runs ordinary requests.
    thread = _call(f"{base}/threads", {})
    out = _call(
        f"{base}/threads/{thread['thread_id']}/runs/wait",
        {
            "assistant_id": "pacore",
            "input": {"messages": [{"role": "user", "content": "What is 2 + 2?"}]},
            "context": {"rounds": [2], "compactor": "answer"},
        },
        timeout=120,
    )
    assert out["answer"]
