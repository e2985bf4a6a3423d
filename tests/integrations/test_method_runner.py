"""A method by name over a real scripted server: names, settings, the run and its record."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pacore_graph.eval.methods import build_method_graph
from pacore_graph.integrations.method_runner import MethodRunner, parse_method_name, run_record
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.grammar import SERVED_MODELS
from pacore_graph.testing import ScriptedServer
from pacore_graph.testing.method_oracle import MethodOracle

QUESTION = "What is 17 + 25? Put the final answer in \\boxed{}."
USER = [{"role": "user", "content": QUESTION}]


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedServer]:
    with ScriptedServer(MethodOracle()).run_in_thread() as srv:
        yield srv


@pytest.mark.parametrize("name", SERVED_MODELS)
def test_every_served_name_is_a_method(name: str) -> None:
    assert parse_method_name(name).family in {
        "pacore",
        "rsa",
        "deepconf",
        "deepconf-online",
        "majority",
        "aggagent",
    }


def test_eval_specs_are_methods_too_and_bad_names_say_what_is_accepted() -> None:
    assert parse_method_name("single").family == "single"
    assert parse_method_name("refine:2").k == 2
    assert parse_method_name("pacore:low").rounds == (4,)
    assert parse_method_name("pacore:8,2").rounds == (8, 2)
    with pytest.raises(ValueError, match=r"pacore-low.*refine:R"):
        parse_method_name("nonsense")
    with pytest.raises(ValueError, match="K=5 cannot be drawn"):  # its own family's message
        parse_method_name("rsa:4,5,1")
    with pytest.raises(ValueError, match="R must be in"):
        parse_method_name("refine:0")


def test_missing_server_or_model_and_unknown_settings_fail_before_any_call(
    upstream: ScriptedServer,
) -> None:
    with pytest.raises(ValueError, match="no server"):
        MethodRunner("pacore-low", model="scripted", env={})
    with pytest.raises(ValueError, match="no model name"):
        MethodRunner("pacore-low", base_url=upstream.base_url, env={})
    with pytest.raises(ValueError, match=r"unknown setting.*colour"):
        MethodRunner(
            "pacore-low", base_url=upstream.base_url, model="scripted", settings={"colour": 1}
        )
    with pytest.raises(ValueError, match="method name gives the rounds"):
        MethodRunner(
            "pacore-low", base_url=upstream.base_url, model="scripted", settings={"rounds": [2]}
        )
    with pytest.raises(ValueError, match="PACORE_RETRIES"):
        MethodRunner(
            "pacore-low", base_url=upstream.base_url, model="scripted", settings={"retries": -3}
        )
    assert upstream.request_count == 0


def test_the_environment_gives_what_arguments_do_not(upstream: ScriptedServer) -> None:
    runner = MethodRunner(
        "majority:3",
        env={"PACORE_BASE_URL": upstream.base_url, "PACORE_MODEL": "scripted"},
        settings={"compactor": "answer"},
    )
    assert runner.base_urls == (upstream.base_url,) and runner.model == "scripted"


async def test_a_run_is_pacore_evals_run_and_its_record_says_so(upstream: ScriptedServer) -> None:
    runner = MethodRunner("pacore:3,2", base_url=upstream.base_url, model="scripted")
    try:
        result = await runner.run(USER, {"seed": 7})
    finally:
        await runner.aclose()
    # The same method, built as `pacore eval` builds it.
    client = OpenAICompatClient(upstream.base_url, "scripted")
    try:
        spec = parse_method_name("pacore:3,2")
        graph = build_method_graph(spec, client, config=PaCoReConfig().with_settings({"seed": 7}))
        direct = (await graph.ainvoke({"messages": USER}))["result"]
    finally:
        await client.aclose()
    assert result.answer == direct.answer
    assert result.effective_ttc == direct.effective_ttc
    record = run_record(result, runner.method, USER)
    assert record["method"] == "pacore:3,2" and record["widths"] == [3, 2, 1]
    assert record["effective_ttc"] == sum(record["ttc_per_round"]) == result.effective_ttc
    answers = [[t["answer"] for t in rnd] for rnd in record["rounds"]]
    # The oracle boxes each answer; the extractor reads it back, trajectory by trajectory.
    assert answers == [
        [t.message.split("{")[1].split("}")[0] if t.message else None for t in rnd]
        for rnd in result.rounds
    ]
    assert record["answer"] == result.answer
    assert record["prompt_tokens"] == sum(t.prompt_tokens for t in result.trajectories)


async def test_a_calls_settings_reach_every_upstream_call(upstream: ScriptedServer) -> None:
    runner = MethodRunner("rsa:3,2,2", base_url=upstream.base_url, model="scripted")
    upstream.reset_log()
    try:
        result = await runner.run(USER, {"temperature": 0.3, "max_tokens": 500, "seed": 2})
    finally:
        await runner.aclose()
    bodies = [r.body for r in upstream.requests]
    assert len(result.trajectories) == 6
    assert bodies and all(b["temperature"] == 0.3 and b["max_tokens"] == 500 for b in bodies)
