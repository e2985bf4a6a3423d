"""The in-process fake model: replies by input, failures as real errors, every call recorded.

Other tests lean on three promises checked here: a reply is a function of
the call (the conversation, the sample's index, the seed), never of call
order; a reply with ``error`` raises the same error a real upstream's 500
would; and every sample asked is recorded with what it was asked.
"""

from __future__ import annotations

import asyncio

import pytest

from pacore_graph.errors import ModelCallError
from pacore_graph.settings.config import SamplingParams
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply

PARAMS = SamplingParams(temperature=0.3)


def convo(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Be brief."}, {"role": "user", "content": question}]


async def test_the_default_reply_depends_on_the_prompt_and_the_sample_only() -> None:
    first, second = FakeChatClient(), FakeChatClient()
    a = await first.complete(convo("q1"), n=3, params=PARAMS)
    await second.complete(convo("other"), params=PARAMS)  # another call first
    b = await second.complete(convo("q1"), n=3, params=PARAMS)
    assert [c.content for c in a] == [c.content for c in b]
    assert len({c.content for c in a}) == 3  # samples of one request differ


async def test_every_sample_is_recorded_with_what_it_was_asked() -> None:
    fake = FakeChatClient(reply=lambda call: f"{call.last_user}#{call.sample_index}")
    out = await fake.complete(convo("q"), n=2, params=PARAMS, seed=11)
    assert [c.content for c in out] == ["q#0", "q#1"]
    assert fake.requests == 1 and len(fake.calls) == 2
    call = fake.calls[1]
    assert (call.sample_index, call.n, call.seed, call.params) == (1, 2, 11, PARAMS)
    assert call.messages == tuple(convo("q")) and call.last_user == "q"


def test_last_user_is_the_last_user_message_or_empty() -> None:
    messages = (
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "reply"},
        {"role": "user", "content": "second"},
        {"role": "assistant", "content": "again"},
    )
    call = FakeCall(messages=messages, sample_index=0, n=1, seed=None, params=PARAMS)
    assert call.last_user == "second"
    system_only = FakeCall(messages=({"role": "system", "content": "s"},), sample_index=0, n=1,
                           seed=None, params=PARAMS)  # fmt: skip
    assert system_only.last_user == ""


async def test_a_reply_with_an_error_raises_a_retryable_model_call_error() -> None:
    fake = FakeChatClient(reply=lambda call: FakeReply(content="", error="HTTP 500: outage"))
    with pytest.raises(ModelCallError, match="outage") as caught:
        await fake.complete(convo("q"), params=PARAMS)
    assert caught.value.status == 500 and caught.value.retryable


async def test_token_counts_are_given_or_counted_from_the_words() -> None:
    def reply(call: FakeCall) -> FakeReply:
        if call.sample_index == 0:
            return FakeReply(content="three word answer", reasoning="two words")
        return FakeReply(content="x", completion_tokens=42, finish_reason="length")

    fake = FakeChatClient(reply=reply, model="m1")
    counted, given = await fake.complete(convo("how many words"), n=2, params=PARAMS)
    assert counted.completion_tokens == len(["three", "word", "answer"]) + len(["two", "words"])
    assert given.completion_tokens == 42 and given.finish_reason == "length"
    prompt_words = sum(len(m["content"].split()) for m in convo("how many words"))
    assert counted.prompt_tokens == given.prompt_tokens == prompt_words
    assert counted.model == "m1" and counted.reasoning == "two words"


async def test_the_latency_given_is_the_latency_reported() -> None:
    fake = FakeChatClient(latency_s=0.01)
    results = await asyncio.gather(
        *(fake.complete(convo(f"q{i}"), params=PARAMS) for i in range(2))
    )
    assert all(r[0].latency_s == fake.latency_s for r in results)
    assert fake.requests == 2
