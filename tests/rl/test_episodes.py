"""Episode records and ``pacore export-episodes``.

Results come from real graph runs (``pacore run --input`` through the runner,
``pacore eval`` through the harness) against an in-process fake model that
answers by input: arithmetic problems, answered right or wrong by the
explorer's seed, one explorer per problem failing. The fake records every
prompt it was sent, so the test can check that each episode's prompt is
*exactly* what the model saw, rebuilt from the results file alone.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import FrozenInstanceError, replace
from pathlib import Path
from typing import Any

import pytest

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.eval.graders import MathGrader
from pacore_graph.eval.harness import run_eval
from pacore_graph.eval.methods import parse_methods
from pacore_graph.graph.records import PaCoReResult, Trajectory
from pacore_graph.rl import RLDependencyError, require_rl
from pacore_graph.rl.episodes import (
    EPISODE_SCHEMA_VERSION,
    Episode,
    chat_message,
    episodes_from_run,
    read_result_runs,
    split_logprobs,
)
from pacore_graph.rl.export import (
    EXPORT_FORMATS,
    export_command,
    export_episodes,
    load_episode_dataset,
)
from pacore_graph.runs.runner import DatasetRecord, result_line, run_dataset
from pacore_graph.settings.config import RetryPolicy, SamplingParams
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply

# Nothing may come from a model hub: everything here is built or read offline.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

SYNTHESIS_START = "You are given a problem and a list of reference responses."
PROBLEMS = {"p1": (2, 3), "p2": (10, 7), "p3": (40, 2)}
WIDTH = 4
FAILING_SEED = 1  # explorer 1 of round 0 fails on every problem


def require_extra(*modules: str) -> None:
    """Skip without the [rl] extra, but fail where CI promised to install it."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return
    strict = os.environ.get("PACORE_REQUIRE_RL") == "1" or (
        os.environ.get("PACORE_REQUIRE_EMBEDDED") == "1"
    )
    message = f"needs the [rl] extra ({', '.join(missing)} missing)"
    if strict:
        pytest.fail(message)
    pytest.skip(message)


def question(pid: str) -> str:
    a, b = PROBLEMS[pid]
    return f"What is {a} + {b}?"


def problem_text(call: FakeCall) -> str:
    text = call.last_user
    if text.startswith(SYNTHESIS_START):
        text = text.split("Original Problem:\n", 1)[1].split("\n\nReference Responses:", 1)[0]
    return text


def answer_of(text: str) -> int:
    a, b = (int(x) for x in re.findall(r"\d+", text)[:2])
    return a + b


class ArithmeticModel:
    """Round 0: right for even seeds, wrong for odd ones, seed 1 fails; synthesis: right.

    Seeds are ``1000 * round + index`` (base seed 0), so the reply is a
    function of the problem and the explorer, never of scheduling.
    """

    def __call__(self, call: FakeCall) -> FakeReply:
        problem = problem_text(call)
        total = answer_of(problem)
        seed = call.seed or 0
        if call.last_user.startswith(SYNTHESIS_START):
            refs = call.last_user.count("Reference ") - 1  # "Reference Responses:" header
            return FakeReply(
                content=f"<think>read {refs} references</think>So the sum is \\boxed{{{total}}}.",
                reasoning=None,
                completion_tokens=7,
            )
        if seed == FAILING_SEED:
            return FakeReply(content="", error="HTTP 500: scripted outage")
        value = total if seed % 2 == 0 else total + 1
        return FakeReply(
            content=f"<think>adding, seed {seed}</think>Explorer {seed}: \\boxed{{{value}}}.",
            reasoning=f"reasoning of seed {seed}",
            completion_tokens=5 + seed,
        )


def config(rounds: tuple[int, ...] = (WIDTH,)) -> PaCoReConfig:
    return PaCoReConfig(
        rounds=rounds,
        sampling=SamplingParams(seed=0),
        retry=RetryPolicy(max_attempts=1),
        batch_samples=False,
    )


def records() -> list[DatasetRecord]:
    return [
        DatasetRecord(
            id=pid,
            messages=(
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": question(pid)},
            ),
            line=i + 1,
            ground_truth={"answer": str(answer_of(question(pid)))},
            raw={"category": "math"},
        )
        for i, pid in enumerate(PROBLEMS)
    ]


async def make_run_results(tmp: Path) -> tuple[Path, FakeChatClient]:
    """``pacore run --input`` results for PROBLEMS, and the fake that answered them."""
    client = FakeChatClient(reply=ArithmeticModel(), model="fake-model")
    graph = build_pacore_graph(client, config=config(), tracing=False)
    out = tmp / "results.jsonl"
    summary = await run_dataset(graph, records(), out, progress=False)
    assert summary.succeeded == len(PROBLEMS)
    return out, client


async def make_eval_results(tmp: Path) -> Path:
    """``pacore eval`` results: pacore:3 and single, two samples each."""
    client = FakeChatClient(reply=ArithmeticModel(), model="fake-model")
    outcome = await run_eval(
        records(),
        parse_methods("pacore:3,single"),
        client,
        config=config(),
        out_dir=tmp / "eval",
        samples=2,
        progress=False,
    )
    return outcome.results


# --------------------------------------------------------------------------- episodes


async def test_episode_prompts_are_exactly_what_the_model_was_sent(tmp_path: Path) -> None:
    results, client = await make_run_results(tmp_path)
    sent: dict[tuple[str, int], list[dict[str, str]]] = {}
    for call in client.calls:
        sent[(problem_text(call), call.seed or 0)] = [chat_message(m) for m in call.messages]
    runs, skipped = read_result_runs(results)
    assert skipped == []
    assert sorted(r.problem_id for r in runs) == sorted(PROBLEMS)
    checked = 0
    for run in runs:
        for ep in episodes_from_run(run):
            seed = 1000 * ep.round + ep.index
            assert list(ep.prompt) == sent[(question(run.problem_id), seed)], ep.trajectory_id
            checked += 1
    # per problem: 4 explorers (one failed) + the final synthesis
    assert checked == len(PROBLEMS) * WIDTH


async def test_episode_fields_rewards_and_references(tmp_path: Path) -> None:
    results, _client = await make_run_results(tmp_path)
    runs, _ = read_result_runs(results)
    run = next(r for r in runs if r.problem_id == "p2")
    episodes = {e.trajectory_id: e for e in episodes_from_run(run)}
    assert sorted(episodes) == ["r0.0", "r0.2", "r0.3", "r1.0"]  # r0.1 failed: no episode

    right, wrong, final = episodes["r0.0"], episodes["r0.3"], episodes["r1.0"]
    assert right.reward == 1.0 and right.grade_extracted == "17"
    assert wrong.reward == 0.0 and wrong.grade_expected == "17"
    assert right.message == "Explorer 0: \\boxed{17}." and right.completion.startswith("<think>")
    assert right.reasoning == "reasoning of seed 0"
    assert right.input_message_ids == () and right.prompt[-1]["content"] == "What is 10 + 7?"
    assert right.prompt[0] == {"role": "system", "content": "Be brief."}
    assert (right.final_round, final.final_round) == (False, True)
    assert right.completion_tokens == 5 and wrong.completion_tokens == 8
    assert right.finish_reason == "stop" and right.model == "fake-model"
    assert right.schedule == (WIDTH, 1) and right.preset == "low"
    assert right.grader == "math" and right.category == "math"
    assert right.ground_truth == {"answer": "17"}
    assert right.run_id == run.run_id and right.episode_id == f"{run.run_id}:r0.0"
    assert right.schema_version == EPISODE_SCHEMA_VERSION

    # the final round read the three surviving messages, in the order the graph chose
    refs = run.result.rounds[1][0].references
    assert final.input_message_ids == tuple(f"r0.{i}" for i in refs)
    assert sorted(final.input_message_ids) == ["r0.0", "r0.2", "r0.3"]
    body = final.prompt[-1]["content"]
    positions = [body.index(episodes[i].message) for i in final.input_message_ids]
    assert positions == sorted(positions)
    assert "read 3 references" in final.completion
    assert final.reward == 1.0

    # the reward is the grader's score of the compacted message, not of the raw text
    grader = MathGrader()
    for ep in episodes.values():
        assert ep.reward == grader.grade(ep.message, {"answer": "17"}).score


async def test_explicit_grader_and_missing_ground_truth(tmp_path: Path) -> None:
    results, _client = await make_run_results(tmp_path)
    runs, _ = read_result_runs(results)
    run = runs[0]

    class Always:
        name = "always"

        def grade(self, response: str, ground_truth: Any) -> Any:
            return MathGrader().grade("\\boxed{1}", "1")

    eps = episodes_from_run(run, grader=Always())
    assert {e.reward for e in eps} == {1.0} and {e.grader for e in eps} == {"always"}

    no_truth = replace(run, ground_truth=None)
    eps = episodes_from_run(no_truth)
    assert {e.reward for e in eps} == {None} and {e.grader for e in eps} == {None}


def test_episode_is_frozen_validated_and_round_trips() -> None:
    ep = Episode(
        episode_id="run:r1.0",
        run_id="run",
        problem_id="p",
        round=1,
        index=0,
        trajectory_id="r1.0",
        final_round=True,
        input_message_ids=("r0.1", "r0.0"),
        prompt=({"role": "user", "content": "x"},),
        completion="c",
        message="m",
        reward=0.5,
        ground_truth={"answer": "3", "tests": [1, 2]},
        sampling={"temperature": 1.0},
        token_ids=(1, 2),
        logprobs=(-0.1, -0.2),
        logprob_tokens=("a", "b"),
    )
    with pytest.raises(FrozenInstanceError):
        ep.reward = 1.0  # type: ignore[misc]
    row = ep.to_row()
    assert {"problem_id", "round", "prompt", "completion", "message", "reward"} <= set(row)
    assert row["ground_truth"] == '{"answer": "3", "tests": [1, 2]}'
    assert row["input_message_ids"] == ["r0.1", "r0.0"]
    assert Episode.from_row(json.loads(json.dumps(row))) == ep
    with pytest.raises(ValueError, match="reward"):
        replace(ep, reward=1.5)
    with pytest.raises(ValueError, match="newer"):
        Episode.from_row({**row, "schema_version": EPISODE_SCHEMA_VERSION + 1})


def test_split_logprobs_shapes() -> None:
    openai_shape = {
        "content": [
            {"token": "4", "logprob": -0.25, "bytes": [52], "top_logprobs": []},
            {"token": "2", "logprob": -1.5, "bytes": [50], "top_logprobs": []},
        ]
    }
    assert split_logprobs(openai_shape) == ((-0.25, -1.5), ("4", "2"))
    assert split_logprobs([-0.5, -1]) == ((-0.5, -1.0), None)
    assert split_logprobs(None) == (None, None)
    assert split_logprobs({"content": None}) == (None, None)
    assert split_logprobs([{"token": "x"}]) == (None, None)


def write_logprob_run(path: Path) -> None:
    """A results line whose trajectories carry vLLM-style token ids and log-probabilities."""
    logprobs = {"content": [{"token": "4", "logprob": -0.5}, {"token": "2", "logprob": -0.1}]}
    rounds = (
        (
            Trajectory(round=0, index=0, content="42", message="42", token_ids=(19, 20),
                       logprobs=logprobs, completion_tokens=2, finish_reason="stop"),
            Trajectory(round=0, index=1, error="HTTP 500", message=None),
        ),
        (
            Trajectory(round=1, index=0, content="<think>t</think>41", message="41",
                       references=(0,), completion_tokens=3, finish_reason="length"),
        ),
    )  # fmt: skip
    result = PaCoReResult(
        answer="41", reasoning=None, rounds=rounds, schedule=(2, 1), model="vllm-model",
        extra={"run_id": "abc", "sampling": {"temperature": 0.7, "logprobs": True}},
    )  # fmt: skip
    record = DatasetRecord(
        id="q", messages=({"role": "user", "content": "6 * 7?"},), line=1, ground_truth="42"
    )
    path.write_text(json.dumps(result_line(record, result)) + "\n", encoding="utf-8")


def test_token_ids_logprobs_and_sampling_are_kept(tmp_path: Path) -> None:
    results = tmp_path / "results.jsonl"
    write_logprob_run(results)
    runs, _ = read_result_runs(results)
    eps = {e.trajectory_id: e for e in episodes_from_run(runs[0])}
    assert sorted(eps) == ["r0.0", "r1.0"]
    first, final = eps["r0.0"], eps["r1.0"]
    assert first.token_ids == (19, 20)
    assert first.logprobs == (-0.5, -0.1) and first.logprob_tokens == ("4", "2")
    assert first.sampling == {"temperature": 0.7, "logprobs": True}
    assert first.run_id == "abc" and first.episode_id == "abc:r0.0"
    assert final.token_ids is None and final.logprobs is None
    assert final.truncated and final.finish_reason == "length"
    assert final.reward == 0.0 and first.reward == 1.0
    assert final.input_message_ids == ("r0.0",)
    assert "Reference 1:\n42" in final.prompt[-1]["content"]


# --------------------------------------------------------------------------- export


async def test_export_jsonl_counts_failures_and_skips_bad_lines(tmp_path: Path) -> None:
    results, _client = await make_run_results(tmp_path)
    with open(results, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"request_id": "bad", "error": "RoundFailedError: boom"}) + "\n")
        fh.write('{"request_id": "cut", "rounds": [[{"rou\n')
    out = tmp_path / "episodes"
    printed: list[str] = []

    class Sink:
        def write(self, text: str) -> int:
            printed.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    report = export_command(results, out, "jsonl", stream=Sink())  # type: ignore[arg-type]
    assert report.runs == len(PROBLEMS) and report.lines == len(PROBLEMS) + 2
    assert report.episodes == len(PROBLEMS) * WIDTH
    assert report.failed_trajectories == len(PROBLEMS)
    assert report.skipped_lines == 2
    assert any("run failed" in r for r in report.skip_reasons)
    assert any("not valid JSON" in r for r in report.skip_reasons)
    assert report.episodes_per_round == ((0, 3 * len(PROBLEMS)), (1, len(PROBLEMS)))
    # round 0: seeds 0 and 2 right, 3 wrong; the synthesis is right: 3 of 4 per problem
    assert report.mean_reward == pytest.approx(0.75)
    assert "exported 12 episodes from 3 runs" in "".join(printed)
    rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(rows) == report.episodes
    assert all(isinstance(r["prompt"], list) and r["prompt"][-1]["role"] == "user" for r in rows)
    saved = json.loads((out / "export_report.json").read_text())
    assert saved["episodes"] == report.episodes and saved["failed_trajectories"] == 3


async def test_export_reads_eval_results(tmp_path: Path) -> None:
    results = await make_eval_results(tmp_path)
    report = export_episodes(results, tmp_path / "out", "jsonl")
    rows = [json.loads(x) for x in (tmp_path / "out" / "episodes.jsonl").read_text().splitlines()]
    by_method: dict[str, set[int]] = {}
    for row in rows:
        by_method.setdefault(row["method"], set()).add(row["sample"])
    assert by_method == {"pacore:3": {0, 1}, "single": {0, 1}}
    # pacore:3 = 3 explorers (seed 1 fails) + 1 synthesis; single = 1 explorer (seed 0)
    per_problem = {"pacore:3": 3, "single": 1}
    for method, n in per_problem.items():
        assert sum(r["method"] == method for r in rows) == n * 2 * len(PROBLEMS)
    assert report.failed_trajectories == 2 * len(PROBLEMS)  # pacore:3 only
    assert {r["run_id"] for r in rows if r["method"] == "single"}.isdisjoint(
        {r["run_id"] for r in rows if r["method"] == "pacore:3"}
    )


def test_export_rejects_bad_arguments_before_writing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        export_episodes(tmp_path / "missing.jsonl", tmp_path / "out")
    results = tmp_path / "results.jsonl"
    write_logprob_run(results)
    with pytest.raises(ValueError, match="format"):
        export_episodes(results, tmp_path / "out", "csv")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
async def test_export_loads_with_datasets(tmp_path: Path, fmt: str) -> None:
    require_extra("datasets", "pyarrow")
    from datasets import load_dataset, load_from_disk

    results, _client = await make_run_results(tmp_path)
    write_logprob_run(tmp_path / "lp.jsonl")
    out = tmp_path / fmt
    report = export_episodes([results, tmp_path / "lp.jsonl"], out, fmt)
    if fmt == "jsonl":
        ds = load_dataset("json", data_files=str(out / "episodes.jsonl"), split="train")
    elif fmt == "parquet":
        ds = load_dataset("parquet", data_files=str(out / "episodes.parquet"), split="train")
    else:
        ds = load_from_disk(str(out))
    assert len(ds) == report.episodes == len(PROBLEMS) * WIDTH + 2
    assert {"problem_id", "round", "prompt", "completion", "message", "reward"} <= set(
        ds.column_names
    )
    # every row comes back as the episode it was written from
    runs = read_result_runs(results)[0] + read_result_runs(tmp_path / "lp.jsonl")[0]
    expected = {e.episode_id: e for run in runs for e in episodes_from_run(run)}
    loaded = {row["episode_id"]: Episode.from_row(row) for row in ds}
    assert loaded == expected
    again = load_episode_dataset(out)
    assert len(again) == len(ds)


# --------------------------------------------------------------------------- packaging


def test_import_does_not_pull_heavy_dependencies() -> None:
    code = (
        "import sys, pacore_graph.rl as rl\n"
        "import pacore_graph.rl.episodes, pacore_graph.rl.export, pacore_graph.rl.recipe\n"
        "import pacore_graph.rl.rewards, pacore_graph.rl.train, pacore_graph.rl.tiny\n"
        "values = [getattr(rl, name) for name in rl.__all__]\n"
        "heavy = [m for m in ('torch', 'transformers', 'trl', 'datasets') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""


def test_missing_extra_names_the_install_line(monkeypatch: pytest.MonkeyPatch) -> None:
    real: Callable[..., Any] = importlib.util.find_spec

    def fake_find_spec(name: str, *args: Any) -> Any:
        return None if name in ("trl", "datasets") else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)
    with pytest.raises(RLDependencyError, match=r"trl, datasets.*pacore-graph\[rl\]"):
        require_rl("torch", "trl", "datasets")
    assert issubclass(RLDependencyError, ImportError)
