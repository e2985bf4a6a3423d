"""What the RL tests share: an arithmetic fake model, real run results from it, record writers.

The fake answers by input (the problem in the prompt, the explorer's seed),
so every results file built here is the same whatever the scheduling; the
episode, export, recipe, pool and training tests all read such files.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.eval.harness import run_eval
from pacore_graph.eval.methods import parse_methods
from pacore_graph.runs.runner import DatasetRecord, result_line, run_dataset
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply
from pacore_graph.values.records import PaCoReResult, Trajectory

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
        retry=ModelRetryPolicy(max_attempts=1),
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


POOL = 24


def train_record(
    pid: str, right: int, *, category: str | None = None, question: str = "what is 6 * 7?"
) -> dict[str, Any]:
    """A PaCoRe-Train record whose pool has ``right`` correct responses out of 24."""
    responses = [
        f"<think>scratch {i}: maybe {i}</think>Response {i}: \\boxed{{{42 if i < right else i}}}"
        for i in range(POOL)
    ]
    record: dict[str, Any] = {
        "id": pid,
        "conversation": [{"role": "user", "content": f"Problem {pid}: {question}"}],
        "responses": responses,
        "ground_truth": {"answer": "42"},
    }
    if category is not None:
        record["category"] = category
    return record


def write_json_list(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


TRAIN_DEPS = ("torch", "transformers", "trl", "datasets", "accelerate", "gguf", "pyarrow")
LAYER_WEIGHT = "model.layers.0.self_attn.q_proj.weight"


def load_weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))
