"""Deterministic per-token log-probabilities from both test servers, in JSON and in streams.

Over real HTTP: the scripted server and the throughput server return
``logprobs.content`` entries whose DeepConf confidence (``-mean(top-k)``)
is the responder's ``confidence``, by input; the throughput server can
stream a choice as it decodes, and a client that hangs up mid-choice stops
it (its ``tokens_generated`` shows it).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from pacore_graph.control.confidence import token_confidences
from pacore_graph.testing import (
    LengthModel,
    ScriptedReply,
    ScriptedRequest,
    ScriptedServer,
    ThroughputServer,
)
from pacore_graph.testing.logprobs import confidence_at, logprob_entries

QUESTION = [{"role": "user", "content": "What is 2 + 2?"}]


def by_seed(req: ScriptedRequest) -> ScriptedReply:
    """Seed 1 is sure of itself, seed 2 is not; other seeds take the hash default."""
    conf = {1: 3.0, 2: (1.0, 0.5)}.get(req.seed or 0)
    return ScriptedReply(
        content="It is \\boxed{4} indeed", reasoning="two and two", confidence=conf
    )


def test_entries_give_the_asked_confidence_for_any_k() -> None:
    for k in (0, 1, 5, 20):
        entries = logprob_entries(["a", "b"], (2.5, 0.25), k)
        assert token_confidences({"content": entries}) == [2.5, 0.25]
        assert [len(e["top_logprobs"]) for e in entries] == [k, k]
        # The sampled token is the most likely one.
        assert all(
            e["logprob"] == max([e["logprob"]] + [t["logprob"] for t in e["top_logprobs"]])
            for e in entries
        )
    assert confidence_at(None, 3, "w") == confidence_at(None, 3, "w")  # stable by input
    assert 0.5 <= confidence_at(None, 3, "w") < 2.5
    with pytest.raises(ValueError):
        confidence_at((), 0, "w")


async def post(url: str, body: dict[str, Any]) -> bytes:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
        assert resp.status == 200
        return await resp.read()


def sse_entries(raw: bytes) -> dict[int, list[dict[str, Any]]]:
    """Per choice, the log-probability entries of every event, in order."""
    out: dict[int, list[dict[str, Any]]] = {}
    for line in raw.decode().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        for choice in json.loads(line[6:]).get("choices", []):
            lp = choice.get("logprobs")
            if lp:
                out.setdefault(choice["index"], []).extend(lp["content"])
    return out


async def test_the_scripted_server_returns_logprobs_by_input_in_json_and_sse() -> None:
    async with ScriptedServer(by_seed, stream_words_per_chunk=2) as srv:
        url = f"{srv.base_url}/chat/completions"
        body = {"model": "m", "messages": QUESTION, "logprobs": True, "top_logprobs": 4}
        sure = json.loads(await post(url, {**body, "seed": 1}))["choices"][0]["logprobs"]
        unsure = json.loads(await post(url, {**body, "seed": 2}))["choices"][0]["logprobs"]
        again = json.loads(await post(url, {**body, "seed": 2}))["choices"][0]["logprobs"]
        streamed = sse_entries(await post(url, {**body, "seed": 2, "stream": True}))
        plain = json.loads(await post(url, {"model": "m", "messages": QUESTION, "seed": 2}))
    words = ["two", "and", "two", "It", "is", "\\boxed{4}", "indeed"]
    assert [e["token"] for e in sure["content"]] == words
    assert token_confidences(sure) == [3.0] * len(words)
    assert token_confidences(unsure) == [1.0] + [0.5] * (len(words) - 1)
    assert unsure == again  # by input, never by call order
    assert streamed == {0: unsure["content"]}  # the stream carries the same entries
    assert plain["choices"][0]["logprobs"] is None  # only when asked


async def test_the_throughput_server_returns_logprobs_and_streams_as_it_decodes() -> None:
    lengths = LengthModel(median=40, sigma=0.0)
    async with ThroughputServer(
        by_seed, throughput=50_000, per_sequence_cap=20_000, lengths=lengths, stream_chunk_tokens=8
    ) as srv:
        url = f"{srv.base_url}/chat/completions"
        body = {"model": "m", "messages": QUESTION, "logprobs": True, "top_logprobs": 3, "seed": 1}
        joined = json.loads(await post(url, body))["choices"][0]
        raw = await post(url, {**body, "stream": True})
    entries = joined["logprobs"]["content"]
    assert len(entries) == 40 and token_confidences(joined["logprobs"]) == [3.0] * 40
    # Streamed: 8 tokens per event, the same entries, and the text joins back exactly.
    streamed = sse_entries(raw)
    assert streamed == {0: entries}
    events = [
        json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: {")
    ]
    deltas = [c["delta"] for e in events for c in e.get("choices", [])]
    content = "".join(d.get("content", "") for d in deltas)
    reasoning = "".join(d.get("reasoning", "") for d in deltas)
    assert content == joined["message"]["content"] and reasoning == joined["message"]["reasoning"]
    assert (
        max(
            len(c["logprobs"]["content"]) for e in events for c in e["choices"] if c.get("logprobs")
        )
        == 8
    )


async def test_hanging_up_on_a_progressive_stream_stops_its_sequence() -> None:
    lengths = LengthModel(median=4000, sigma=0.0)
    async with ThroughputServer(
        by_seed, throughput=4_000, per_sequence_cap=4_000, lengths=lengths, stream_chunk_tokens=16
    ) as srv:
        url = f"{srv.base_url}/chat/completions"
        body = {"model": "m", "messages": QUESTION, "logprobs": True, "seed": 2, "stream": True}
        seen = 0
        async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
            async for line in resp.content:
                if line.startswith(b"data: {") and b'"logprobs": {' in line:
                    seen += 1
                if seen >= 3:
                    break  # hang up after three slices
        stats: dict[str, Any] = {}
        for _ in range(100):
            stats = srv.stats()
            if stats["in_flight"] == 0:
                break
            await asyncio.sleep(0.02)
    assert stats["choices_cancelled"] == 1
    assert stats["tokens_generated"] < 4000  # the rest was never decoded
