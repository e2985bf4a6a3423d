"""The method oracle (testing/method_oracle): its stated rules, and the ranking they give.

The rules are checked by input (the same request always gets the same reply;
the shares over many seeds are what the docstring states), then the whole
comparison runs over real HTTP and the methods come out in the order the
rules imply: a single sample < a 16-way vote < RSA < PaCoRe's synthesis, and
a confidence filter beats the plain vote while online DeepConf spends fewer
tokens than the vote it replaces.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from pacore_graph.eval.datasets import easy_arithmetic_problems, write_jsonl
from pacore_graph.eval.harness import run_eval
from pacore_graph.eval.methods import parse_methods
from pacore_graph.graphs.rsa import rsa_prompt
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.runs.runner import read_dataset
from pacore_graph.settings.config import ModelRetryPolicy, PaCoReConfig, SamplingParams
from pacore_graph.testing import MethodOracle, ScriptedRequest, ScriptedServer
from pacore_graph.testing.method_oracle import oracle_truth
from pacore_graph.values.prompts import render_synthesis

QUESTION = "What is 50 + 98? Put your final answer in \\boxed{}."
SEEDS = range(400)


def request(text: str, seed: int) -> ScriptedRequest:
    return ScriptedRequest(
        messages=[{"role": "user", "content": text}],
        last_user=text,
        sample_index=0,
        model="scripted",
        params={"seed": seed},
    )


def ask(oracle: MethodOracle, text: str, seed: int) -> str:
    return oracle(request(text, seed)).content


def right_share(oracle: MethodOracle, text: str) -> float:
    return statistics.fmean("\\boxed{148}" in ask(oracle, text, seed) for seed in SEEDS)


def test_the_truth_is_read_from_the_question() -> None:
    assert oracle_truth(QUESTION) == 148
    assert oracle_truth("What is 54 - 6? ...") == 48
    assert oracle_truth("What is 34 × 66?") == 2244
    assert oracle_truth("Name a colour.") is None


def test_replies_are_a_function_of_the_input() -> None:
    oracle = MethodOracle()
    assert [ask(oracle, QUESTION, s) for s in range(20)] == [
        ask(MethodOracle(), QUESTION, s) for s in range(20)
    ]
    assert len({ask(oracle, QUESTION, s) for s in range(20)}) > 1


def test_a_first_round_sample_is_right_near_its_stated_accuracy() -> None:
    for accuracy in (0.2, 0.35, 0.6):
        assert abs(right_share(MethodOracle(accuracy=accuracy), QUESTION) - accuracy) < 0.15


def test_pacore_synthesis_is_right_when_the_truth_is_among_its_references() -> None:
    oracle = MethodOracle()
    with_truth = render_synthesis(
        QUESTION, ["So \\boxed{149}.", "So \\boxed{148}.", "So \\boxed{149}."]
    )
    without = render_synthesis(QUESTION, ["So \\boxed{149}.", "So \\boxed{150}."])
    assert right_share(oracle, with_truth) > 0.88
    assert right_share(oracle, without) < 0.5


def test_rsa_aggregation_follows_the_share_of_right_candidates() -> None:
    oracle = MethodOracle()
    one_of_four = rsa_prompt(
        QUESTION, ["\\boxed{148}", "\\boxed{149}", "\\boxed{149}", "\\boxed{150}"]
    )
    three_of_four = rsa_prompt(QUESTION, ["\\boxed{148}"] * 3 + ["\\boxed{149}"])
    none = rsa_prompt(QUESTION, ["\\boxed{149}", "\\boxed{149}", "\\boxed{150}"])
    assert right_share(oracle, one_of_four) < right_share(oracle, three_of_four)
    # No right candidate: the most common candidate answer is copied.
    assert {ask(oracle, none, seed) for seed in range(10)} == {"So the answer is \\boxed{149}."}


def agent_request(seed: int, *tool_results: str) -> ScriptedRequest:
    """An aggregator agent's call: the overview, its tools, the results it got so far."""
    overview = f"Problem:\n{QUESTION}\n\n16 independent attempts at this problem ..."
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You aggregate."},
        {"role": "user", "content": overview},
    ]
    for k, result in enumerate(tool_results):
        messages.append({"role": "assistant", "content": "", "tool_calls": []})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": result})
    tools = [{"type": "function", "function": {"name": "list_trajectories"}}]
    return ScriptedRequest(
        messages=messages,
        last_user=overview,
        sample_index=0,
        model="scripted",
        params={"seed": seed, "tools": tools},
    )


def listing(*answers: str) -> str:
    rows = [
        json.dumps({"index": i, "chars": 400 + i, "answer": a, "failed": False})
        for i, a in enumerate(answers)
    ]
    return "\n".join(["N trajectories, 0 failed. Answers: ...", *rows])


def test_the_aggregator_agent_lists_reads_the_two_commonest_then_answers() -> None:
    oracle = MethodOracle()
    first = oracle(agent_request(1))
    assert [c.name for c in first.tool_calls] == ["list_trajectories"]
    listed = listing("149", "148", "149", "150", "148", "149")
    second = oracle(agent_request(1, listed))
    assert [(c.name, c.arguments) for c in second.tool_calls] == [
        ("read_trajectory", {"index": 0, "start": 100}),  # 149, three votes
        ("read_trajectory", {"index": 1, "start": 101}),  # 148, two
    ]
    # Having read the truth, it is right at the stated rate; not having read it, never.
    read_truth = ("... \\boxed{149}.", "... \\boxed{148}.")
    answers = [oracle(agent_request(s, listed, *read_truth)).content for s in SEEDS]
    share = statistics.fmean("\\boxed{148}" in a for a in answers)
    assert abs(share - 0.85) < 0.06
    assert {a for a in answers if "148" not in a} == {"So the answer is \\boxed{149}."}
    without = listing("149", "150", "149")
    read_wrong = ("... \\boxed{149}.", "... \\boxed{150}.")
    assert {oracle(agent_request(s, without, *read_wrong)).content for s in range(20)} == {
        "So the answer is \\boxed{149}."
    }
    # Nothing listed (every attempt failed): a first-round sample, as the rule says.
    failed = '{"index": 0, "failed": true, "error": "x"}'
    lone = [oracle(agent_request(s, failed)).content for s in SEEDS]
    assert 0.15 < statistics.fmean("\\boxed{148}" in a for a in lone) < 0.55


def test_wrong_samples_falter_more_often_than_right_ones() -> None:
    oracle = MethodOracle()
    lows: dict[bool, list[float]] = {True: [], False: []}
    for seed in SEEDS:
        reply = oracle(request(QUESTION, seed))
        assert isinstance(reply.confidence, tuple)
        lows["\\boxed{148}" in reply.content].append(min(reply.confidence))
    faltered = {right: statistics.fmean(c < 1.2 for c in values) for right, values in lows.items()}
    assert faltered[False] > 0.6 > 0.25 > faltered[True]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="accuracy"):
        MethodOracle(accuracy=0.95)
    with pytest.raises(ValueError, match="words"):
        MethodOracle(words=2)


async def test_the_comparison_ranks_the_methods_as_the_rules_imply(tmp_path: Path) -> None:
    data = tmp_path / "easy.jsonl"
    write_jsonl(easy_arithmetic_problems(20, seed=0), data)
    records, errors = read_dataset(data)
    assert not errors
    methods = parse_methods(
        "single,majority:16,rsa:16,4,3,deepconf:16,deepconf-online:16,aggagent:16,pacore:medium"
    )
    out = tmp_path / "eval"
    async with ScriptedServer(MethodOracle()) as srv:
        client = OpenAICompatClient(
            srv.base_url, "scripted", retry=ModelRetryPolicy(max_attempts=1)
        )
        config = PaCoReConfig(
            retry=ModelRetryPolicy(max_attempts=1), sampling=SamplingParams(seed=1234)
        ).with_settings({"deepconf_keep": 0.1, "deepconf_window": 16})
        await run_eval(records, methods, client, config=config, out_dir=out, progress=False)
        await client.aclose()
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))["methods"]
    acc = {name: stats["accuracy"] for name, stats in report.items()}
    ttc = {name: stats["mean_ttc"] for name, stats in report.items()}
    assert acc["single"] < acc["majority:16"] < acc["rsa:16,4,3"] < acc["pacore:medium"]
    assert acc["majority:16"] < acc["aggagent:16"] < acc["pacore:medium"]
    assert acc["deepconf:16"] > acc["majority:16"]
    assert acc["deepconf-online:16"] > acc["majority:16"]
    assert ttc["deepconf-online:16"] < ttc["majority:16"]
