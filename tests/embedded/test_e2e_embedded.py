"""End to end: the real ``pacore`` command on the embedded model.

This is the README's first command with a smaller run (K=2, 48 tokens per
call) so it stays quick on two CPU cores: a real server process, real HTTP,
real tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from embedded_support import require_embedded

pytestmark = pytest.mark.embedded


def test_pacore_run_on_the_embedded_model_returns_real_text_and_tokens() -> None:
    require_embedded()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PACORE_"))}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pacore_graph.cli",
            "run",
            "What is 2 + 3?",
            "--rounds",
            "2",
            "--max-tokens",
            "48",
            "--json",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "embedded server ready" in proc.stderr
    out = json.loads(proc.stdout)
    assert [len(r) for r in out["rounds"]] == [2, 1]
    assert out["answer"].strip(), "the model returned no text"
    trajectories = [t for rnd in out["rounds"] for t in rnd]
    assert all(t["error"] is None for t in trajectories)
    # Token counts come from the server's usage, not from us. The round of 2 is one
    # n=2 request (the server honours n): its usage is exact for the pair, and each
    # sample's share is estimated from its text unless the server said it per choice.
    assert all(t["completion_tokens"] > 0 for t in trajectories)
    assert all(sum(t["completion_tokens"] for t in rnd) <= 48 * len(rnd) for rnd in out["rounds"])
    exact = [t for t in trajectories if not t.get("tokens_estimated")]
    assert out["rounds"][1][0] in exact  # a single sample's usage is its own
    assert all(t["completion_tokens"] <= 48 for t in exact)
    assert all(t["prompt_tokens"] > 5 for t in trajectories)
    assert out["effective_ttc"] == sum(t["completion_tokens"] for t in trajectories)
    # The final round's prompt is the synthesis prompt, so it is longer.
    assert out["rounds"][1][0]["prompt_tokens"] > out["rounds"][0][0]["prompt_tokens"]
    assert out["model"] == "smollm2-135m-instruct"
