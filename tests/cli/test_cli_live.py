"""``pacore run "question"`` live: progress on stderr, tokens on a terminal's stdout.

The CLI runs in a subprocess whose stdout is a real pseudo-terminal (``pty``),
as in a user's shell; a second run with stdout on a pipe must not stream.
"""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

REPO_ROOT = Path(__file__).resolve().parents[2]
REF_RE = re.compile(r"^Reference \d+:$", re.M)


def by_input(req: ScriptedRequest) -> ScriptedReply:
    refs = len(REF_RE.findall(req.last_user))
    words = " ".join(f"tok{k}" for k in range(10))
    return ScriptedReply(
        content=f"Final {refs}-{req.sample_index}: {words} done",
        reasoning="hidden thoughts",
        completion_tokens=5,
    )


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(by_input, stream_words_per_chunk=1).run_in_thread() as srv:
        yield srv


def _argv(srv: ScriptedServer) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pacore_graph.cli",
        "run",
        "Q?",
        "--base-url",
        srv.base_url,
        "--model",
        "scripted",
        "--rounds",
        "3",
    ]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO_ROOT))


def test_terminal_gets_streamed_tokens_and_live_round_progress(server: ScriptedServer) -> None:
    primary, secondary = pty.openpty()
    proc = subprocess.Popen(
        _argv(server),
        stdout=secondary,
        stderr=subprocess.PIPE,
        env=_env(),
        cwd=REPO_ROOT,
    )
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(primary, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(primary)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    out = b"".join(chunks).decode().replace("\r\n", "\n")
    lines = out.strip().splitlines()
    assert lines[0] == "Final 3-0: tok0 tok1 tok2 tok3 tok4 tok5 tok6 tok7 tok8 tok9 done"
    assert "effective TTC" in lines[-1]
    assert out.count("Final 3-0") == 1  # streamed once, not printed again
    # The final call went out over SSE, the first round as one n=3 request.
    streamed = [r for r in server.requests if r.body.get("stream")]
    assert len(streamed) == 1
    progress = err.decode()
    assert "round 1: 3 explorer(s) started" in progress
    assert "round 1: 3 message(s) kept, 15 tokens" in progress
    assert "round 2: 1 explorer(s) started" in progress


def test_a_pipe_gets_the_answer_once_and_nothing_streams(server: ScriptedServer) -> None:
    proc = subprocess.run(
        [*_argv(server), "--no-progress"],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=REPO_ROOT,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Final 3-0: tok0")
    assert proc.stderr == ""
    assert not any(r.body.get("stream") for r in server.requests)
