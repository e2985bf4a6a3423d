"""DeepConf offline and online as graphs (graphs/deepconf.py), over real HTTP.

The scripted server's replies, and their per-token confidence, are a function
of the request (its seed and sample index: which trace it is); the
throughput server shows what a stopped trace saved upstream.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from pacore_graph.graph.builder import ainvoke_pacore
from pacore_graph.graph.explorer import ExploreTask
from pacore_graph.graphs.deepconf import (
    STOP_BELOW,
    ConfidenceUnavailableError,
    ConfidenceVote,
    build_deepconf_graph,
    build_deepconf_online_graph,
    default_warmup,
)
from pacore_graph.graphs.majority import build_majority_graph
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.settings.config import PaCoReConfig, SamplingParams
from pacore_graph.testing import (
    LengthModel,
    ScriptedReply,
    ScriptedRequest,
    ScriptedServer,
    ThroughputServer,
)

BASE = 100
QUESTION = "What is 2 + 2?"
CONFIG = PaCoReConfig(sampling=SamplingParams(seed=BASE))
THINKING = " ".join(f"step{i}" for i in range(30))


def trace(req: ScriptedRequest) -> int:
    """Which trace a request's choice is: its explorer seed (n-batched: first seed + index)."""
    return (req.seed or 0) + req.sample_index - BASE


def offline_reply(req: ScriptedRequest) -> ScriptedReply:
    """Traces 0-2 say 4 and are sure (3.0); traces 3-7 say 7 and are not (1.0)."""
    sure = trace(req) < 3
    return ScriptedReply(
        content=f"So \\boxed{{{4 if sure else 7}}}",
        reasoning="thinking it over",
        confidence=3.0 if sure else 1.0,
    )


async def run_offline(graph_of: Any) -> tuple[Any, list[dict[str, Any]]]:
    async with ScriptedServer(offline_reply) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
        result = await ainvoke_pacore(graph_of(client), QUESTION)
        await client.aclose()
        return result, [r.body for r in srv.requests]


async def test_offline_deepconf_keeps_the_confident_share_where_the_majority_is_wrong() -> None:
    majority, _ = await run_offline(lambda c: build_majority_graph(c, 8, config=CONFIG))
    deepconf, bodies = await run_offline(lambda c: build_deepconf_graph(c, 8, config=CONFIG))
    assert majority.extra["winner"] == "7"
    assert deepconf.answer == "So \\boxed{4}" and deepconf.extra["winner"] == "4"
    # The top 10% by lowest group confidence: the three sure traces (ties all kept).
    assert deepconf.extra["kept"] == ["r0.0", "r0.1", "r0.2"]
    assert deepconf.extra["votes"] == {"4": 9.0}
    assert deepconf.extra["confidences"]["r0.5"] == 1.0
    assert deepconf.extra["aggregator"] == "deepconf"
    # One n=8 request asking for log-probabilities; the same records and TTC as majority.
    (body,) = bodies
    assert body["n"] == 8 and body["logprobs"] is True and body["top_logprobs"] == 20
    assert deepconf.schedule == majority.schedule == (8,)
    assert deepconf.effective_ttc == majority.effective_ttc > 0
    # The records keep each token's confidence, not the server's 20 alternatives per token.
    for t in deepconf.rounds[0]:
        entries = t.logprobs["content"]
        assert entries and all(set(e) == {"token", "logprob", "confidence"} for e in entries)
        assert {e["confidence"] for e in entries} == {3.0 if t.index < 3 else 1.0}


async def test_offline_share_one_is_a_confidence_weighted_vote_of_all() -> None:
    result, _ = await run_offline(lambda c: build_deepconf_graph(c, 8, config=CONFIG, share=1.0))
    assert len(result.extra["kept"]) == 8
    assert result.extra["votes"] == {"4": 9.0, "7": 5.0} and result.answer == "So \\boxed{4}"


async def test_offline_without_logprobs_is_a_clear_error() -> None:
    async def no_logprobs(req: ScriptedRequest) -> str:
        return "So \\boxed{4}"

    async with ScriptedServer(no_logprobs) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
        graph = build_deepconf_graph(client, 2, config=CONFIG)
        # The scripted server answers logprobs when asked; a run that did not ask has none.
        plain = await ainvoke_pacore(build_majority_graph(client, 2, config=CONFIG), QUESTION)
        with pytest.raises(ConfidenceUnavailableError, match="log-probabilities"):
            ConfidenceVote().aggregate(plain.rounds)
        assert (await ainvoke_pacore(graph, QUESTION)).answer == "So \\boxed{4}"
        await client.aclose()


def online_reply(req: ScriptedRequest) -> ScriptedReply:
    """Warm-up (round 0): traces 0-1 sure (3.0) of 4, 2-3 unsure (1.0) of 7.

    Round 1 (seeds BASE+1000+i): traces 0-1 sure of 4; traces 2-5 start sure
    and falter after 8 tokens (0.5), on their way to 7.
    """
    t = trace(req)
    if t < 1000:
        sure = t < 2
        return ScriptedReply(
            content=f"So \\boxed{{{4 if sure else 7}}}",
            reasoning=THINKING,
            confidence=3.0 if sure else 1.0,
        )
    sure = t - 1000 < 2
    return ScriptedReply(
        content=f"So \\boxed{{{4 if sure else 7}}}",
        reasoning=THINKING,
        confidence=3.0 if sure else (3.0,) * 8 + (0.5,),
    )


async def test_online_deepconf_stops_faltering_traces_and_records_them_dropped() -> None:
    async with ScriptedServer(online_reply) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
        graph = build_deepconf_online_graph(client, 10, config=CONFIG, warmup=4, keep=0.5, window=4)
        result = await ainvoke_pacore(graph, QUESTION)
        await client.aclose()
        bodies = [r.body for r in srv.requests]
    warmup, later = result.rounds
    assert result.schedule == (4, 6) and len(warmup) == 4 and len(later) == 6
    # The bar: the 50th percentile of the warm-up's lowest group confidences [3, 3, 1, 1].
    assert result.extra["threshold"] == 2.0
    dropped = [t for t in later if t.finish_reason == "dropped"]
    assert [t.id for t in dropped] == ["r1.2", "r1.3", "r1.4", "r1.5"] == result.extra["dropped"]
    for t in dropped:
        # The window (3,3,3,0.5) then (3,3,0.5,0.5) < 2 at token 10: the 4-word event ends at 12.
        assert t.completion_tokens == 12 and not t.failed
        assert t.artifacts["deepconf"]["stopped_upstream"] is True
    kept = [t for t in later if t.finish_reason != "dropped"]
    assert all(t.completion_tokens == 32 for t in kept)  # 30 words of thought, 2 of answer
    # Dropped traces' tokens count: effective TTC is every token spent.
    assert result.effective_ttc == 4 * 32 + 2 * 32 + 4 * 12
    # Warm-up traces under the bar and stopped traces do not vote.
    assert result.extra["voters"] == ["r0.0", "r0.1", "r1.0", "r1.1"]
    assert result.answer == "So \\boxed{4}" and result.extra["winner"] == "4"
    # One n=4 JSON warm-up, then one streamed request per later trace.
    assert bodies[0]["n"] == 4 and not bodies[0].get("stream")
    assert all(b["stream"] and b.get("n", 1) == 1 and b["top_logprobs"] == 20 for b in bodies[1:])
    assert sorted(b["seed"] for b in bodies[1:]) == [BASE + 1000 + i for i in range(6)]


async def test_online_stopping_saves_tokens_upstream_on_the_throughput_server() -> None:
    def reply(req: ScriptedRequest) -> ScriptedReply:
        t = trace(req)
        faltering = t >= 1000 and (t - 1000) % 2 == 1
        return ScriptedReply(
            content="So \\boxed{4}", confidence=(2.0,) * 16 + (0.2,) if faltering else 2.0
        )

    lengths = LengthModel(median=2000, sigma=0.0)  # long: a loaded machine still stops early
    async with ThroughputServer(
        reply, throughput=20_000, per_sequence_cap=5_000, lengths=lengths, stream_chunk_tokens=8
    ) as srv:
        client = OpenAICompatClient(srv.base_url, "throughput", api_key="k")
        graph = build_deepconf_online_graph(client, 8, config=CONFIG, warmup=2, window=8)
        result = await ainvoke_pacore(graph, QUESTION)
        await client.aclose()
        for _ in range(100):
            stats = srv.stats()
            if stats["in_flight"] == 0:
                break
            await asyncio.sleep(0.02)
    dropped = [t for t in result.rounds[1] if t.finish_reason == "dropped"]
    assert [t.index for t in dropped] == [1, 3, 5]
    # The server stopped decoding the dropped traces a slice or two after their stop
    # (it decodes 8 tokens a slice and learns of the hang-up late): far from 2000 each.
    assert [t.completion_tokens for t in dropped] == [24, 24, 24]
    assert stats["choices_cancelled"] == 3
    assert stats["tokens_generated"] < 5 * 2000 + 3 * 1000
    assert result.effective_ttc <= stats["tokens_generated"]
    assert result.answer == "So \\boxed{4}"


async def test_online_state_checkpoints_and_its_task_type_round_trips() -> None:
    saver = InMemorySaver()
    async with ScriptedServer(online_reply) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
        graph = build_deepconf_online_graph(
            client, 6, config=CONFIG, warmup=4, keep=0.5, window=4, checkpointer=saver
        )
        config: Any = {"configurable": {"thread_id": "dc-1"}}
        result = await ainvoke_pacore(graph, QUESTION, config=config)
        await client.aclose()
    state = await graph.aget_state(config)
    assert result.extra["threshold"] == 2.0
    # The later traces' bar rides in their tasks' extras (the plan's), checkpointed with them.
    (prompt, *others) = state.values["plan"].prompts
    assert prompt.extras[STOP_BELOW] == {"threshold": 2.0, "window": 4} and len(others) == 1
    task = ExploreTask(
        run_id="r",
        problem_id=None,
        round=1,
        index=0,
        width=1,
        messages=(),
        extras={STOP_BELOW: {"threshold": 1.5, "window": 4}},
    )
    serde = graph.checkpointer.serde
    assert serde.loads_typed(serde.dumps_typed(task)) == task


def test_online_shapes_that_cannot_run_are_refused() -> None:
    client = OpenAICompatClient("http://127.0.0.1:9/v1", "m", api_key="k")
    assert [default_warmup(n) for n in (2, 4, 16, 64, 256)] == [1, 2, 4, 16, 16]
    with pytest.raises(ValueError, match="warm-up"):
        build_deepconf_online_graph(client, 4, warmup=4)
    with pytest.raises(ValueError, match="keep"):
        build_deepconf_online_graph(client, 4, keep=0)
    with pytest.raises(ValueError, match="N in"):
        build_deepconf_online_graph(client, 1)
    with pytest.raises(ValueError, match="share"):
        build_deepconf_graph(client, 4, share=1.5)


async def test_the_result_names_a_chosen_warmup_trace_as_its_final() -> None:
    def warmup_sure(req: ScriptedRequest) -> ScriptedReply:
        t = trace(req)
        if t < 1000:  # the warm-up is sure of 4
            return ScriptedReply(content="So \\boxed{4}", reasoning=THINKING, confidence=3.0)
        return ScriptedReply(content="So \\boxed{5}", reasoning=THINKING, confidence=2.5)

    async with ScriptedServer(warmup_sure) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
        graph = build_deepconf_online_graph(client, 3, config=CONFIG, warmup=2, window=4)
        result = await ainvoke_pacore(graph, QUESTION)
        await client.aclose()
    # 4 weighs 3.0 + 3.0 against 5's 2.5: the winner's first voter is in the warm-up.
    assert result.extra["chosen"] == "r0.0"
    assert result.final.id == "r0.0" and result.final.message == result.answer


async def test_online_streams_progress_events_with_the_dropped_traces_tokens() -> None:
    async with ScriptedServer(online_reply) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
        graph = build_deepconf_online_graph(client, 8, config=CONFIG, warmup=4, keep=0.5, window=4)
        events = [
            e
            async for e in graph.astream(
                {"messages": [{"role": "user", "content": QUESTION}]}, stream_mode="custom"
            )
        ]
        await client.aclose()
    started = [(e["round"], e["width"]) for e in events if e["event"] == "round_started"]
    assert started == [(0, 4), (1, 4)]
    later = {e["index"]: e for e in events if e["event"] == "explorer_finished" and e["round"] == 1}
    assert [later[i]["completion_tokens"] for i in range(4)] == [32, 32, 12, 12]


async def test_the_kept_share_and_the_window_come_from_the_config_unless_given() -> None:
    # --deepconf-keep / --deepconf-window set these config fields for both graphs.
    keep_all = CONFIG.model_copy(update={"deepconf_keep": 1.0, "deepconf_window": 4})
    offline, _ = await run_offline(lambda c: build_deepconf_graph(c, 8, config=keep_all))
    assert len(offline.extra["kept"]) == 8 and offline.extra["window"] == 4
    assert offline.extra["share"] == 1.0
    given, _ = await run_offline(lambda c: build_deepconf_graph(c, 8, config=keep_all, share=0.1))
    assert given.extra["kept"] == ["r0.0", "r0.1", "r0.2"]

    async def online(config: PaCoReConfig) -> Any:
        async with ScriptedServer(online_reply) as srv:
            client = OpenAICompatClient(srv.base_url, "scripted", api_key="k")
            graph = build_deepconf_online_graph(client, 10, config=config, warmup=4)
            result = await ainvoke_pacore(graph, QUESTION)
            await client.aclose()
        return result

    windowed = await online(CONFIG.model_copy(update={"deepconf_keep": 0.5, "deepconf_window": 4}))
    whole = await online(CONFIG.model_copy(update={"deepconf_keep": 0.5}))
    # A 4-token window sees the faltering traces fall below the bar; with DeepConf's
    # 2,048 tokens each 32-token trace is one group, never stopped.
    assert windowed.extra["dropped"] == ["r1.2", "r1.3", "r1.4", "r1.5"]
    assert whole.extra["dropped"] == [] and whole.extra["window"] == 2048
    assert windowed.extra["keep"] == whole.extra["keep"] == 0.5
    assert windowed.extra["threshold"] == 2.0  # the median of the warm-up's [3, 3, 1, 1]
    assert windowed.effective_ttc < whole.effective_ttc
