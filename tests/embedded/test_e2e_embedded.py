"""End to end: the real ``pacore`` command on the embedded model.

This is the README's first command with a smaller run (K=2, 48 tokens per
call) so it stays quick on two CPU cores: a real server process, real HTTP,
real tokens. DeepConf runs there too, offline and online, now that the
server returns token log-probabilities (before, its first request was a 400).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest
from embedded_support import require_embedded

pytestmark = pytest.mark.embedded


def _pacore_run(*args: str) -> dict[str, Any]:
    """``pacore run ARGS --json --no-progress`` with no server configured: the embedded model."""
    require_embedded()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PACORE_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pacore_graph.cli", "run", *args, "--json", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "embedded server ready" in proc.stderr
    out: dict[str, Any] = json.loads(proc.stdout)
    return out


def _assert_logprobs_of_every_token(out: dict[str, Any]) -> None:
    """Each trajectory kept one logprobs entry per completion token, with its confidence.

    A record folds the server's top-20 alternatives into the token's
    confidence, ``-mean(top-k logprobs)`` (``control.confidence.compact_logprobs``):
    positive when there were alternatives, so the server sent them.
    """
    for trajectory in (t for rnd in out["rounds"] for t in rnd):
        assert trajectory["error"] is None
        content = trajectory["logprobs"]["content"]
        assert len(content) == trajectory["completion_tokens"] > 0
        assert all(entry["logprob"] <= 0.0 < entry["confidence"] for entry in content)


def test_pacore_run_on_the_embedded_model_returns_real_text_and_tokens() -> None:
    out = _pacore_run("What is 2 + 3?", "--rounds", "2", "--max-tokens", "48")
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


def test_deepconf_offline_runs_on_the_embedded_model_and_records_the_kept_traces() -> None:
    out = _pacore_run("What is 2+3?", "--method", "deepconf:4", "--max-tokens", "64", "--seed", "3")

    assert out["schedule"] == [4]
    assert out["failures"] == 0
    _assert_logprobs_of_every_token(out)
    extra = out["extra"]
    assert extra["aggregator"] == "deepconf"
    ids = {t["id"] for t in out["rounds"][0]}
    assert set(extra["confidences"]) == ids
    assert all(c > 0 for c in extra["confidences"].values())
    assert extra["kept"] and set(extra["kept"]) <= ids
    assert out["answer"].strip()


def test_deepconf_online_runs_on_the_embedded_model_and_drops_traces_upstream() -> None:
    """The second round's streamed traces are cut as their window's confidence falls.

    ``--deepconf-keep 0.1`` puts the bar near the better warm-up trace and an
    8-token window lets a 64-token trace fall below it; the run is seeded
    (choice ``i`` samples with ``seed + i``), so the traces, and which fall,
    are the same every run.
    """
    out = _pacore_run(
        "What is 2+3?",
        "--method",
        "deepconf-online:4",
        "--deepconf-keep",
        "0.1",
        "--deepconf-window",
        "8",
        "--max-tokens",
        "64",
        "--seed",
        "3",
    )

    assert out["schedule"] == [2, 2]  # warm-up of 2, then 2 streamed
    assert out["failures"] == 0
    _assert_logprobs_of_every_token(out)
    extra = out["extra"]
    assert extra["aggregator"] == "deepconf-online"
    dropped = set(extra["dropped"])
    assert dropped, "no trace fell below the bar"
    assert extra["voters"]
    for trace in out["rounds"][1]:
        record = trace["artifacts"]["deepconf"]
        assert record["window"] == 8
        assert (
            record["stopped"] == (trace["id"] in dropped) == (trace["finish_reason"] == "dropped")
        )
        if record["stopped"]:
            # The client hung up and the server stopped decoding: a full window, not 64 tokens.
            assert record["stopped_upstream"] is True
            assert 8 <= trace["completion_tokens"] < 64
            assert record["lowest"] < record["threshold"]
