"""Per-round sampling and models over real HTTP: what each round sends, records and traces.

"A small model explores, a large one synthesises": each round's requests
carry its own ``model``, ``temperature``, ``top_p`` and ``max_tokens`` on the
wire (one ``n=K`` request per round still), its trajectories say what it
used, and so do the result and the spans. A run without per-round settings
sends and records exactly what it did before.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pacore_graph import PaCoReConfig, Round, ainvoke_pacore, build_pacore_graph
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.llm.langchain_client import LangChainChatClient, make_chat_model
from pacore_graph.otel.spans import TraceOptions
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

QUESTION = "What is 6 x 7?"


def by_model(req: ScriptedRequest) -> ScriptedReply:
    """The reply names the model and temperature it was asked with (by input, not order)."""
    return ScriptedReply(
        content=f"{req.model} at {req.params.get('temperature')} says 42 ({req.sample_index})",
        completion_tokens=5,
    )


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(by_model, model="served").run_in_thread() as srv:
        yield srv


def sent(server: ScriptedServer) -> list[tuple[str, float, int, Any]]:
    """(model, temperature, n, max_tokens) of every request, in arrival order."""
    return [
        (
            r.body["model"],
            r.body["temperature"],
            r.body.get("n", 1),
            r.body.get("max_tokens", r.body.get("max_completion_tokens")),  # ChatOpenAI's name
        )
        for r in server.requests
    ]


def settings(temperature: float, max_tokens: int | None, model: str) -> dict[str, Any]:
    return {"temperature": temperature, "top_p": 1.0, "max_tokens": max_tokens, "model": model}


PER_ROUND = PaCoReConfig(
    rounds=[Round(3, temperature=0.9, model="small"), 2],
    final=Round(1, temperature=0.1, max_tokens=50, model="large"),
)


async def test_each_round_sends_records_and_traces_its_own_settings(
    server: ScriptedServer, traced: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    provider, exporter = traced
    server.reset_log()
    client = OpenAICompatClient(server.base_url, "base")
    graph = build_pacore_graph(
        client, config=PER_ROUND, tracing=TraceOptions(tracer_provider=provider)
    )
    try:
        result = await ainvoke_pacore(graph, QUESTION)
    finally:
        await client.aclose()
    # One n=K request per round, each with its round's model and sampling.
    assert sent(server) == [("small", 0.9, 3, None), ("base", 1.0, 2, None), ("large", 0.1, 1, 50)]
    first, second, final = result.rounds
    assert {t.model for t in first} == {"small"} and {t.model for t in second} == {"base"}
    assert final[0].model == "large" and result.answer.startswith("large at 0.1 says 42")
    assert first[0].sampling == settings(0.9, None, "small")
    assert second[0].sampling == settings(1.0, None, "base")
    assert final[0].sampling == settings(0.1, 50, "large")
    used = [first[0].sampling, second[0].sampling, final[0].sampling]
    assert result.extra["round_settings"] == used
    assert result.to_dict()["rounds"][0][0]["sampling"]["model"] == "small"
    spans = exporter.get_finished_spans()
    chats = sorted(
        (s for s in spans if s.name.startswith("chat ")),
        key=lambda s: (s.attributes["pacore.round.index"], s.attributes["pacore.explorer.index"]),
    )
    assert [s.name for s in chats] == ["chat small"] * 3 + ["chat base"] * 2 + ["chat large"]
    temperatures = [s.attributes["gen_ai.request.temperature"] for s in chats]
    assert temperatures == [0.9] * 3 + [1.0] * 2 + [0.1]
    assert chats[-1].attributes["gen_ai.request.max_tokens"] == 50
    assert {s.attributes["gen_ai.response.model"] for s in chats} == {"small", "base", "large"}
    (run,) = [s for s in spans if s.name == "invoke_workflow pacore"]
    assert run.attributes["pacore.rounds"] == (3, 2)
    shown = json.loads(str(run.attributes["pacore.round_settings"]))
    assert [(r["k"], r["model"], r["temperature"]) for r in shown] == [
        (3, "small", 0.9),
        (2, "base", 1.0),
        (1, "large", 0.1),
    ]


async def test_a_runs_context_gives_per_round_settings_as_json(server: ScriptedServer) -> None:
    server.reset_log()
    client = OpenAICompatClient(server.base_url, "base")
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[4]))
    try:
        out = await graph.ainvoke(
            {"messages": [{"role": "user", "content": QUESTION}]},
            context={"rounds": [{"k": 2, "model": "small"}], "final": {"model": "large"}},
        )
    finally:
        await client.aclose()
    assert sent(server) == [("small", 1.0, 2, None), ("large", 1.0, 1, None)]
    assert [t.model for rnd in out["result"].rounds for t in rnd] == ["small", "small", "large"]


async def test_a_run_without_round_settings_sends_and_records_as_before(
    server: ScriptedServer,
) -> None:
    server.reset_log()
    client = OpenAICompatClient(server.base_url, "base")
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[Round(2)]))
    try:
        result = await ainvoke_pacore(graph, QUESTION)
    finally:
        await client.aclose()
    assert sent(server) == [("base", 1.0, 2, None), ("base", 1.0, 1, None)]
    assert all(t.sampling is None and t.model == "base" for t in result.trajectories)
    assert "round_settings" not in result.extra and "model" not in result.extra["sampling"]
    assert "sampling" not in result.to_dict()["rounds"][0][0]


async def test_the_langchain_client_sends_each_rounds_model(server: ScriptedServer) -> None:
    server.reset_log()
    chat = make_chat_model(server.base_url, "base", api_key="k")
    client = LangChainChatClient(chat)
    graph = build_pacore_graph(client, config=PER_ROUND)
    try:
        result = await ainvoke_pacore(graph, QUESTION)
    finally:
        await client.aclose()
    assert sent(server) == [("small", 0.9, 3, None), ("base", 1.0, 2, None), ("large", 0.1, 1, 50)]
    assert [rnd[0].model for rnd in result.rounds] == ["small", "base", "large"]
