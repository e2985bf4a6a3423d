"""SampleBatcher on its own: K callers with one prompt become ``n``-sample requests.

Today's behaviour, tested directly (the graph tests see it only through
whole runs): a full group is one request; requests are cut at the limiter's
capacity; a failure reaches every caller of its request; a disabled batcher
or a group of one sends ``n=1``; a group that never fills is sent after the
window. The fake client answers by input (the prompt and the sample's index
in its request), and one test goes over real HTTP to the scripted server.
"""

from __future__ import annotations

import asyncio

import pytest

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.errors import ModelCallError
from pacore_graph.llm.batching import SampleBatcher
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.settings.config import SamplingParams
from pacore_graph.testing import ScriptedServer
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply

PARAMS = SamplingParams(max_tokens=16)


def by_prompt(call: FakeCall) -> FakeReply:
    """Names the prompt and the sample's place in its request: who got what is visible."""
    if "fail" in call.last_user:
        return FakeReply(content="", error="HTTP 500: scripted failure")
    return FakeReply(content=f"{call.last_user}#{call.sample_index}/{call.n}")


def prompt(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


async def ask(batcher: SampleBatcher, text: str, k: int, *, seed: int | None = None) -> list[str]:
    """``k`` callers of one group, as the K explorers of a round are."""
    results = await asyncio.gather(
        *(
            batcher.sample(prompt(text), group=("run", text), expected=k, seed=seed)
            for _ in range(k)
        )
    )
    return [c.content for c in results]


async def test_a_full_group_is_one_request_with_n_samples() -> None:
    client = FakeChatClient(reply=by_prompt)
    batcher = SampleBatcher(client, SequenceLimiter(64), PARAMS)
    contents = await ask(batcher, "P", 4, seed=7)
    assert client.requests == 1
    assert sorted(contents) == [f"P#{i}/4" for i in range(4)]  # one distinct sample each
    assert {(c.n, c.seed) for c in client.calls} == {(4, 7)}


async def test_requests_are_cut_at_the_limiters_capacity() -> None:
    client = FakeChatClient(reply=by_prompt)
    limiter = SequenceLimiter(3)
    batcher = SampleBatcher(client, limiter, PARAMS)
    contents = await ask(batcher, "P", 7)
    assert client.requests == 3
    assert sorted({c.n for c in client.calls}) == [1, 3]
    # Each caller's sample came from a request of 3, 3 or 1.
    assert sorted(x.split("/")[1] for x in contents) == ["1"] + ["3"] * 6
    assert limiter.in_use() == 0


async def test_groups_with_different_prompts_do_not_mix() -> None:
    client = FakeChatClient(reply=by_prompt)
    batcher = SampleBatcher(client, SequenceLimiter(64), PARAMS)
    a, b = await asyncio.gather(ask(batcher, "A", 2), ask(batcher, "B", 3))
    assert client.requests == 2
    assert sorted(a) == ["A#0/2", "A#1/2"] and sorted(b) == ["B#0/3", "B#1/3", "B#2/3"]


async def test_a_failed_request_fails_every_caller_of_it() -> None:
    client = FakeChatClient(reply=by_prompt)
    batcher = SampleBatcher(client, SequenceLimiter(64), PARAMS)
    outcomes = await asyncio.gather(
        *(batcher.sample(prompt("fail"), group="g", expected=3) for _ in range(3)),
        return_exceptions=True,
    )
    assert client.requests == 1
    assert all(isinstance(o, ModelCallError) for o in outcomes)
    assert all("scripted failure" in str(o) for o in outcomes)


@pytest.mark.parametrize(("enabled", "expected"), [(False, 3), (True, 1)])
async def test_disabled_or_single_callers_send_one_sample_per_request(
    enabled: bool, expected: int
) -> None:
    client = FakeChatClient(reply=by_prompt)
    batcher = SampleBatcher(client, SequenceLimiter(64), PARAMS, enabled=enabled)
    calls = 3 if not enabled else 1
    contents = await asyncio.gather(
        *(batcher.sample(prompt("P"), group="g", expected=expected, seed=5) for _ in range(calls))
    )
    assert client.requests == calls
    assert {(c.n, c.seed) for c in client.calls} == {(1, 5)}
    assert [c.content for c in contents] == ["P#0/1"] * calls


async def test_a_group_that_never_fills_is_sent_after_the_window() -> None:
    """A custom explorer may skip its call: the others must not wait for it forever."""
    client = FakeChatClient(reply=by_prompt)
    batcher = SampleBatcher(client, SequenceLimiter(64), PARAMS, window_s=0.001)
    contents = await asyncio.wait_for(
        asyncio.gather(*(batcher.sample(prompt("P"), group="g", expected=3) for _ in range(2))),
        timeout=30,
    )
    assert client.requests == 1
    assert sorted(c.content for c in contents) == ["P#0/2", "P#1/2"]


async def test_one_n_request_over_real_http() -> None:
    async with ScriptedServer(model="m") as server:
        client = OpenAICompatClient(server.base_url, "m")
        try:
            batcher = SampleBatcher(client, SequenceLimiter(64), PARAMS)
            contents = await ask(batcher, "What is 2+2?", 4, seed=11)
        finally:
            await client.aclose()
        bodies = [r.body for r in server.requests]
    assert len(bodies) == 1
    assert bodies[0]["n"] == 4 and bodies[0]["seed"] == 11
    assert len(contents) == 4 and all(contents)
