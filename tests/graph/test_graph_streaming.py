"""Streaming, the LangGraph way: tokens in ``messages`` mode, progress in ``custom`` mode.

Against the scripted server over real HTTP: the final round's call must go out
with ``"stream": true`` (SSE), and its deltas must arrive as
``AIMessageChunk`` objects while the run is still going; the progress events
follow the contract documented in :mod:`pacore_graph.graph.streaming`.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.graph.nodes import PaCoReNodes
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

REF_RE = re.compile(r"^Reference (\d+):$", re.M)


def by_input(req: ScriptedRequest) -> ScriptedReply:
    refs = len(REF_RE.findall(req.last_user))
    words = " ".join(f"w{refs}.{req.sample_index}.{k}" for k in range(12))
    return ScriptedReply(
        content=f"answer with {refs} refs: {words} -> {refs + 40}",
        reasoning=f"think {refs} {req.sample_index}",
        completion_tokens=20 + refs + req.sample_index,
    )


async def test_final_round_tokens_stream_as_message_chunks() -> None:
    async with ScriptedServer(by_input, stream_words_per_chunk=2, stream_chunk_delay=0.01) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted")
        graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[3, 2]))
        chunks: list[AIMessageChunk] = []
        final: dict[str, Any] = {}
        async for mode, data in graph.astream(
            {"messages": [{"role": "user", "content": "Q?"}]},
            stream_mode=["messages", "values"],
        ):
            if mode == "messages":
                message, meta = data
                assert meta["langgraph_node"] == "explore"
                chunks.append(message)
            else:
                final = data
        await client.aclose()
        streamed = [r for r in srv.requests if r.body.get("stream")]
    result = final["result"]
    assert len(chunks) > 5  # many deltas, not one message at the end
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    joined = "".join(str(c.content) for c in chunks)
    assert joined == result.final.content
    assert joined.startswith("answer with 2 refs")
    reasoning = "".join(c.additional_kwargs.get("reasoning_content", "") for c in chunks)
    assert reasoning == result.final.reasoning
    # Only the final K=1 call streamed, over SSE; the answer message is not sent twice.
    assert len(streamed) == 1
    assert isinstance(final["messages"][-1], AIMessage)
    assert final["messages"][-1].id == chunks[0].id


async def test_without_a_token_listener_nothing_streams() -> None:
    async with ScriptedServer(by_input) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted")
        graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]))
        await graph.ainvoke({"messages": [{"role": "user", "content": "Q?"}]})
        await client.aclose()
        assert not any(r.body.get("stream") for r in srv.requests)


async def test_custom_mode_yields_the_progress_contract() -> None:
    async with ScriptedServer(by_input) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted")
        graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[3, 2]))
        events = [
            e
            async for e in graph.astream(
                {"messages": [{"role": "user", "content": "Q?"}]}, stream_mode="custom"
            )
        ]
        await client.aclose()
    started = [e for e in events if e["event"] == "round_started"]
    assert started == [
        {"event": "round_started", "round": 0, "width": 3},
        {"event": "round_started", "round": 1, "width": 2},
        {"event": "round_started", "round": 2, "width": 1},
    ]
    finished = [e for e in events if e["event"] == "explorer_finished"]
    assert sorted((e["round"], e["index"]) for e in finished) == [
        (0, 0),
        (0, 1),
        (0, 2),
        (1, 0),
        (1, 1),
        (2, 0),
    ]
    assert all(e["error"] is None for e in finished)
    # One n=3 request: the server's total usage is shared out, the sum stays exact.
    assert sum(e["completion_tokens"] for e in finished if e["round"] == 0) == 20 + 21 + 22
    compacted = [e for e in events if e["event"] == "round_compacted"]
    assert compacted[0] == {
        "event": "round_compacted",
        "round": 0,
        "messages": 3,
        "failures": 0,
        "completion_tokens": 20 + 21 + 22,
    }
    assert [e["round"] for e in compacted] == [0, 1, 2]
    # Order: a round starts, its explorers finish, then it is compacted.
    kinds = [(e["event"], e["round"]) for e in events]
    assert kinds.index(("round_started", 1)) > kinds.index(("round_compacted", 0))


async def test_failed_explorers_show_their_error_in_progress() -> None:
    def fail_one(req: ScriptedRequest) -> int | None:
        return 400 if req.seed == 1 else None

    async with ScriptedServer(by_input, fail_when=fail_one) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted")
        config = PaCoReConfig(rounds=[3], batch_samples=False, sampling={"seed": 0})
        graph = build_pacore_graph(client, config=config)
        events = [
            e
            async for e in graph.astream(
                {"messages": [{"role": "user", "content": "Q?"}]}, stream_mode="custom"
            )
        ]
        await client.aclose()
    failed = [e for e in events if e["event"] == "explorer_finished" and e["error"]]
    assert [(e["round"], e["index"]) for e in failed] == [(0, 1)]
    assert "HTTP 400" in failed[0]["error"]
    (compacted,) = [e for e in events if e["event"] == "round_compacted" and e["round"] == 0]
    assert (compacted["messages"], compacted["failures"]) == (2, 1)


def test_nodes_run_alone_outside_a_graph() -> None:
    """A node is a method: callable without a graph (progress writes are no-ops then)."""
    import asyncio

    from pacore_graph.graph.explorer import ExploreTask
    from pacore_graph.otel.spans import RunTracer, TraceOptions
    from pacore_graph.values.compaction import compactor_from_name
    from pacore_graph.values.records import Trajectory

    class Echo:
        async def explore(self, task: ExploreTask, config: Any) -> Trajectory:
            return Trajectory(
                round=task.round, index=task.index, content=f"<think>x</think>e{task.index}"
            )

    cfg = PaCoReConfig(rounds=[2])
    nodes = PaCoReNodes(
        config=cfg,
        compactor=compactor_from_name("conclusion"),
        explorer=Echo(),
        tracer=RunTracer(TraceOptions(enabled=False), config=cfg, model=None),
    )

    async def go() -> dict[str, Any]:
        question: Any = {"messages": [{"role": "user", "content": "Q?"}]}
        state: dict[str, Any] = await nodes.prepare(question, {})
        state.update(await nodes.round_node(state, {}))  # type: ignore[arg-type]
        sends = await nodes.fan_out(state)  # type: ignore[arg-type]
        assert [s.arg.index for s in sends] == [0, 1]
        pending = []
        for s in sends:
            pending += (await nodes.explore(s.arg, {}))["pending"]
        state["pending"] = pending
        return await nodes.compact(state, {})  # type: ignore[arg-type]

    update = asyncio.run(go())
    assert [t.message for t in update["rounds"][0]] == ["e0", "e1"]
    assert update["round"] == 1
