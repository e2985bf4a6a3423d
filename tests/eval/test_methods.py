"""RSA and DeepConf in ``pacore eval --methods`` (eval/methods, settings/grammar).

Over real HTTP: ``run_eval`` runs ``majority``, ``rsa``, ``deepconf`` and
``deepconf-online`` against one scripted server, whose replies (answer and
per-token confidence) are a function of the request, and reports each family.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from pacore_graph.eval.datasets import easy_arithmetic_problems, write_jsonl
from pacore_graph.eval.harness import run_eval
from pacore_graph.eval.methods import (
    build_method_graph,
    method_settings,
    parse_method,
    parse_methods,
)
from pacore_graph.graph.builder import ainvoke_pacore
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.runs.runner import read_dataset
from pacore_graph.settings.config import ModelRetryPolicy, PaCoReConfig, SamplingParams
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

PROBLEMS = easy_arithmetic_problems(3, seed=1)
QUESTIONS = [p["messages"][0]["content"] for p in PROBLEMS]
ANSWERS = [int(p["ground_truth"]["answer"]) for p in PROBLEMS]
BASE = 40


def test_the_new_families_parse_with_their_shapes() -> None:
    rsa = parse_method("rsa:16,4,10")
    assert (rsa.family, rsa.rounds, rsa.k, rsa.expected_trajectories) == ("rsa", (16,) * 10, 4, 160)
    online = parse_method("deepconf-online:16")
    assert (online.family, online.k, online.expected_trajectories) == ("deepconf-online", 16, 16)
    assert parse_method("deepconf:8").family == "deepconf"
    agent = parse_method("aggagent:8")
    assert (agent.family, agent.rounds, agent.k, agent.expected_trajectories) == (
        "aggagent",
        (8,),
        8,
        9,
    )
    texts = [
        s.text
        for s in parse_methods("single,majority:16,rsa:16,4,3,deepconf-online:16,pacore:medium")
    ]
    assert texts == ["single", "majority:16", "rsa:16,4,3", "deepconf-online:16", "pacore:medium"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rsa:4,5,2", "cannot be drawn"),
        ("rsa:4,2", "rsa:N,K,T"),
        ("rsa", "rsa:N,K,T"),
        ("rsa:4,2,0", "T"),
        ("deepconf-online:1", "at least 2"),
        ("deepconf:0", "N"),
        ("deepconf-offline:4", "deepconf-online:N"),
    ],
)
def test_bad_specs_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_method(text)


def respond(req: ScriptedRequest) -> ScriptedReply:
    """Sample s of problem p: right (and sure) iff (p + s) % 2 == 0, else off by one and unsure."""
    (p,) = [i for i, q in enumerate(QUESTIONS) if q in req.last_user]
    s = (req.seed or BASE) - BASE + req.sample_index
    right = (p + s) % 2 == 0
    value = ANSWERS[p] if right else ANSWERS[p] + 1
    return ScriptedReply(
        content=f"The result is \\boxed{{{value}}}",
        reasoning="add it up " * 3,
        confidence=3.0 if right else 1.0,
    )


async def test_eval_runs_rsa_and_deepconf_beside_majority_with_one_accounting(
    tmp_path: Path,
) -> None:
    data = tmp_path / "easy.jsonl"
    write_jsonl(PROBLEMS, data)
    records, errors = read_dataset(data)
    assert not errors
    methods = "majority:4,rsa:4,2,2,deepconf:4,deepconf-online:4"
    out = tmp_path / "eval"
    async with ScriptedServer(respond) as srv:
        client = OpenAICompatClient(
            srv.base_url, "scripted", retry=ModelRetryPolicy(max_attempts=1)
        )
        config = PaCoReConfig(
            retry=ModelRetryPolicy(max_attempts=1), sampling=SamplingParams(seed=BASE)
        )
        outcome = await run_eval(
            records, parse_methods(methods), client, config=config, out_dir=out, progress=False
        )
        await client.aclose()
    assert outcome.ran == 12
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    families = {name: stats["family"] for name, stats in report["methods"].items()}
    assert families == {
        "majority:4": "majority",
        "rsa:4,2,2": "rsa",
        "deepconf:4": "deepconf",
        "deepconf-online:4": "deepconf-online",
    }
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    for line in lines:
        result = line["result"]
        # One accounting: the mean TTC is the records' sum of completion tokens.
        spent = sum(t["completion_tokens"] for rnd in result["rounds"] for t in rnd)
        assert result["effective_ttc"] == spent
    rsa = [line for line in lines if line["method"] == "rsa:4,2,2"]
    assert all(len(line["result"]["rounds"]) == 2 for line in rsa)
    # Sure samples are right here, so a confidence vote is right on every problem.
    assert report["methods"]["deepconf:4"]["accuracy"] == 1.0
    md = (out / "report.md").read_text(encoding="utf-8")
    for name in families:
        assert re.search(rf"^\| {re.escape(name)} \|", md, re.M), name


def test_build_method_graph_names_each_family() -> None:
    client = OpenAICompatClient("http://127.0.0.1:9/v1", "m", api_key="k")
    config = PaCoReConfig()
    for text, name in [
        ("rsa:4,2,3", "rsa"),
        ("deepconf:4", "deepconf"),
        ("deepconf-online:4", "deepconf-online"),
    ]:
        graph = build_method_graph(parse_method(text), client, config=config)
        assert graph.name == name


def test_method_settings_name_what_the_listed_methods_read() -> None:
    config = PaCoReConfig()
    assert method_settings(parse_methods("single,majority:4,pacore:low"), config) == {}
    assert method_settings(parse_methods("rsa:4,2,2"), config) == {"rsa_final": "majority"}
    offline = method_settings(parse_methods("deepconf:4"), config)
    assert offline == {"deepconf_keep": 0.1, "deepconf_window": 2048}
    assert method_settings(parse_methods("deepconf-online:4"), config)["deepconf_keep"] == 0.9
    both = method_settings(parse_methods("deepconf:4,deepconf-online:4"), config)
    assert both["deepconf_keep"] == "0.1 (deepconf), 0.9 (deepconf-online)"
    chosen = config.with_settings(
        {
            "reference_filter": "confidence:0.5",
            "consensus_weight": "confidence",
            "early_stop_consensus": 0.7,
            "rsa_final": "aggregate",
            "deepconf_keep": 0.3,
            "deepconf_window": 64,
        }
    )
    assert method_settings(parse_methods("pacore:low,rsa:4,2,2,deepconf-online:4"), chosen) == {
        "reference_filter": "confidence:0.5",
        "consensus_weight": "confidence",
        "rsa_final": "aggregate",
        "deepconf_keep": 0.3,
        "deepconf_window": 64,
    }
    assert method_settings(parse_methods("single"), chosen) == {}  # no method reads them


async def test_build_method_graph_hands_each_family_its_settings_from_the_config() -> None:
    config = PaCoReConfig(
        retry=ModelRetryPolicy(max_attempts=1),
        sampling=SamplingParams(seed=BASE),
        rsa_final="aggregate",
        reference_filter="confidence:0.5",
        deepconf_window=4,
    )
    async with ScriptedServer(respond) as srv:
        client = OpenAICompatClient(
            srv.base_url, "scripted", retry=ModelRetryPolicy(max_attempts=1)
        )

        async def run(spec: str) -> tuple[Any, list[Any]]:
            srv.requests.clear()
            graph = build_method_graph(parse_method(spec), client, config=config)
            return await ainvoke_pacore(graph, QUESTIONS[0]), [r.body for r in srv.requests]

        rsa, _ = await run("rsa:3,2,2")
        pacore, pacore_bodies = await run("pacore:4")
        offline, _ = await run("deepconf:4")
        await client.aclose()
    assert rsa.schedule == (3, 3, 1)  # rsa_final aggregate: one more aggregation
    assert pacore.extra["round_control"][0]["reference_filter"] == "confidence:0.5"
    assert all(b["logprobs"] is True for b in pacore_bodies)  # the confidence graph asks
    assert offline.extra["window"] == 4
