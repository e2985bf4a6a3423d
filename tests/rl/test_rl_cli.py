"""From ``pacore run`` over a dataset to episodes and a training set, as commands.

The model is the scripted OpenAI-compatible server over real HTTP, asked for
token ids and log-probabilities the way a user would ask vLLM for them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_support import run_argv

from pacore_graph.cli import main
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer


def solver(request: ScriptedRequest) -> ScriptedReply:
    """Right on even samples and in synthesis rounds, wrong otherwise: rewards 0 and 1."""
    question = request.last_user
    right = "Reference" in question or request.sample_index % 2 == 0
    answer = 42 if right else 41
    return ScriptedReply(content=f"thinking words here so the answer is \\boxed{{{answer}}}")


@pytest.fixture
def results(tmp_path: Path) -> Path:
    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"q{i}",
                    "messages": [{"role": "user", "content": f"Question {i}: 40 + 2?"}],
                    "ground_truth": {"answer": "42"},
                    "category": "math",
                }
            )
            + "\n"
            for i in range(3)
        )
    )
    out = tmp_path / "results.jsonl"
    with ScriptedServer(solver, model="m").run_in_thread() as srv:
        code = main(
            run_argv(
                data,
                out,
                "4",
                "--logprobs",
                "--token-ids",
                "--no-progress",
                base_url=srv.base_url,
                model="m",
            )
        )
        bodies = [r.body for r in srv.requests]
    assert code == 0
    assert all(b.get("logprobs") is True and b.get("return_token_ids") is True for b in bodies)
    return out


def test_run_keeps_exact_token_ids_and_logprobs(results: Path) -> None:
    line = json.loads(results.read_text().splitlines()[0])
    first = line["rounds"][0]
    assert len(first) == 4
    for t in first:
        # With per-sample token ids the n=4 request's usage is split exactly, not estimated.
        assert t["tokens_estimated"] is False
        assert len(t["token_ids"]) == t["completion_tokens"] > 0
        assert len(t["logprobs"]["content"]) == t["completion_tokens"]


def test_export_episodes_jsonl_and_hf(
    results: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "episodes"
    assert main(["export-episodes", str(results), "--out", str(out), "--format", "jsonl"]) == 0
    (episodes_file,) = out.glob("*.jsonl")
    rows = [json.loads(x) for x in episodes_file.read_text().splitlines()]
    assert len(rows) == 3 * (4 + 1)
    for key in ("problem_id", "round", "prompt", "completion", "message", "reward"):
        assert all(key in r for r in rows)
    round0 = [r for r in rows if r["round"] == 0]
    assert sorted({r["reward"] for r in round0}) == [0.0, 1.0]
    assert all(r["reward"] == 1.0 for r in rows if r["round"] == 1)
    assert all(r["token_ids"] and len(r["token_ids"]) == r["completion_tokens"] for r in rows)
    assert all(len(r["logprobs"]) == r["completion_tokens"] for r in rows)
    sampling = json.loads(rows[0]["sampling"])
    assert sampling["temperature"] == 1.0 and sampling["logprobs"] is True
    synth = next(r for r in rows if r["round"] == 1)
    assert synth["prompt"][-1]["content"].startswith("You are given a problem")
    assert len(synth["input_message_ids"]) == 4
    datasets = pytest.importorskip("datasets")
    hf_dir = tmp_path / "episodes-hf"
    assert main(["export-episodes", str(results), "--out", str(hf_dir), "--format", "hf"]) == 0
    ds = datasets.load_from_disk(str(hf_dir))
    assert len(ds) == len(rows) and set(ds.column_names) >= {"prompt", "completion", "reward"}
    capsys.readouterr()


def test_trainset_from_our_runs(results: Path, tmp_path: Path) -> None:
    out = tmp_path / "trainset"
    code = main(
        [
            "trainset",
            str(results),
            "--out",
            str(out),
            "--min-messages",
            "2",
            "--max-messages",
            "3",
            "--math-threshold",
            "0.9",
            "--seed",
            "1",
        ]
    )
    assert code == 0
    files = sorted(p for p in out.rglob("*") if p.is_file())
    assert files, "the trainset command wrote nothing"


def test_rl_commands_report_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.jsonl"
    assert main(["export-episodes", str(missing), "--out", str(tmp_path / "e")]) == 2
    assert main(["train", "--dataset", str(missing), "--model", "x", "--max-steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "missing.jsonl" in err
