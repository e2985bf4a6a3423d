"""Compactors as parts: a function, an async function, an object, or an LLM over real HTTP.

What each must show: the message it returns is what the next round reads;
async compactors of a round overlap; a compactor that raises fails its
trajectory only (a round fails when all did); an LLM compactor's tokens are
kept apart from effective TTC.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from pacore_graph import PaCoReConfig, RoundFailedError, Trajectory, build_pacore_graph
from pacore_graph.graph.builder import ainvoke_pacore
from pacore_graph.graph.compact_step import (
    COMPACTION_ARTIFACT,
    DEFAULT_COMPACTION_INSTRUCTION,
    LLMCompactor,
    compact_step,
)
from pacore_graph.llm.langchain_client import make_chat_model
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply
from pacore_graph.values.compaction import AnswerCompactor

QUESTION = "What is 6 x 7?"


def explorer_reply(call: FakeCall) -> FakeReply:
    return FakeReply(content=f"<think>hmm</think>The answer is {40 + call.sample_index}.")


def shout(t: Trajectory) -> str:
    return t.content.upper()


async def test_a_function_is_a_compactor_and_its_message_is_what_the_next_round_reads() -> None:
    client = FakeChatClient(reply=explorer_reply)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]), compactor=shout)
    result = await ainvoke_pacore(graph, QUESTION)
    assert [t.message for t in result.rounds[0]] == [t.content.upper() for t in result.rounds[0]]
    synthesis = client.calls[-1].messages[-1]["content"]
    assert "<THINK>HMM</THINK>THE ANSWER IS 40." in synthesis
    assert compact_step(shout).name == "shout" and compact_step(AnswerCompactor()).name == "answer"


async def test_async_compactors_of_a_round_run_concurrently() -> None:
    in_flight = 0
    most = 0

    async def slow(t: Trajectory) -> str:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.05)
        in_flight -= 1
        return f"#{t.index}"

    graph = build_pacore_graph(
        FakeChatClient(reply=explorer_reply), config=PaCoReConfig(rounds=[4]), compactor=slow
    )
    result = await ainvoke_pacore(graph, QUESTION)
    assert [t.message for t in result.rounds[0]] == ["#0", "#1", "#2", "#3"]
    assert most == 4  # the round's four compactions overlapped


async def test_a_compactor_that_raises_fails_that_trajectory_only() -> None:
    def picky(t: Trajectory) -> str:
        if t.round == 0 and t.index == 1:
            return {}["missing"]  # type: ignore[no-any-return]
        return t.content

    graph = build_pacore_graph(
        FakeChatClient(reply=explorer_reply), config=PaCoReConfig(rounds=[3]), compactor=picky
    )
    result = await ainvoke_pacore(graph, QUESTION)
    first = result.rounds[0]
    assert [t.failed for t in first] == [False, True, False]
    assert first[1].error == "compactor picky: KeyError: 'missing'" and first[1].message is None
    assert first[1].content  # what the explorer said is kept
    assert result.answer  # the round went on with the other two

    def broken(t: Trajectory) -> str:
        raise ValueError("no")

    graph = build_pacore_graph(
        FakeChatClient(reply=explorer_reply), config=PaCoReConfig(rounds=[2]), compactor=broken
    )
    with pytest.raises(RoundFailedError, match="compactor broken: ValueError: no"):
        await ainvoke_pacore(graph, QUESTION)


def test_what_is_not_a_compactor_is_refused_naming_it() -> None:
    for bad in (42, Trajectory):
        with pytest.raises(TypeError, match="is not a compactor"):
            build_pacore_graph(FakeChatClient(), compactor=bad)
    with pytest.raises(TypeError, match="needs a chat model or Runnable"):
        LLMCompactor(object())


def summarise(req: ScriptedRequest) -> ScriptedReply:
    """The explorers answer at length; the compactor (asked with its instruction) is brief."""
    if req.messages[0].get("content") == DEFAULT_COMPACTION_INSTRUCTION:
        attempt = req.last_user.rpartition("Attempt:\n")[2]
        return ScriptedReply(content=f"short: {attempt.split()[-1]}", completion_tokens=3)
    return ScriptedReply(
        content=f"A long derivation, sample {req.sample_index}: the answer is 42",
        completion_tokens=50,
    )


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(summarise, model="m").run_in_thread() as srv:
        yield srv


async def test_an_llm_compactor_rewrites_each_message_and_its_tokens_are_not_ttc(
    server: ScriptedServer,
) -> None:
    from pacore_graph.llm.client import OpenAICompatClient

    server.reset_log()
    client = OpenAICompatClient(server.base_url, "m")
    summariser = make_chat_model(server.base_url, "m", api_key="k")
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[3]), compactor=summariser)
    try:
        result = await ainvoke_pacore(graph, QUESTION)
    finally:
        await client.aclose()
    first = result.rounds[0]
    assert [t.message for t in first] == ["short: 42"] * 3
    asks = [r for r in server.requests if r.body["messages"][0]["role"] == "system"]
    assert len(asks) == 3 + 1  # each trajectory of each round, the final one too
    assert all(t.artifacts[COMPACTION_ARTIFACT]["completion_tokens"] == 3 for t in first)
    assert result.effective_ttc == 50 * 4  # the explorers' tokens only
    spent = result.extra["compaction_tokens"]
    assert spent["completion_tokens"] == 3 * 4 and spent["prompt_tokens"] > 0
    assert "short: 42" in server.requests[-2].body["messages"][-1]["content"]  # final round read it
