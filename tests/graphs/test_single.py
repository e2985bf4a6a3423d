"""graphs/single: one call, its answer, over the in-process fake chat client."""

from __future__ import annotations

from baselines_support import QUESTION

from pacore_graph.graphs.single import build_single_graph
from pacore_graph.testing.fake_client import FakeChatClient, FakeReply


async def test_single_makes_one_call_and_returns_its_answer() -> None:
    client = FakeChatClient(
        lambda call: FakeReply(
            content="<think>6*7 is 42</think>It is \\boxed{42}", completion_tokens=13
        )
    )
    graph = build_single_graph(client)
    out = await graph.ainvoke({"messages": [{"role": "user", "content": QUESTION}]})
    result = out["result"]
    assert client.requests == 1 and len(client.calls) == 1
    assert client.calls[0].last_user == QUESTION
    assert out["answer"] == result.answer == "It is \\boxed{42}"
    assert out["messages"][-1].content == "It is \\boxed{42}"
    assert result.schedule == (1,)
    assert [len(r) for r in result.rounds] == [1]
    assert result.effective_ttc == 13
    assert result.extra["aggregator"] == "first"
    assert result.final.id == result.extra["chosen"] == "r0.0"
