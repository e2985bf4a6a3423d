"""A watched stream: a choice stopped mid-way from its log-probabilities, cancelled upstream.

Over real HTTP against the throughput server streaming as it decodes (its
``tokens_generated`` shows what the server decoded).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

from pacore_graph.control.confidence import WindowConfidence
from pacore_graph.llm.choice_stream import STOPPED, ChoiceStream
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing import LengthModel, ScriptedReply, ScriptedRequest, ThroughputServer
from pacore_graph.values.records import Completion

PROMPT = [{"role": "user", "content": "What is 2 + 2?"}]
PARAMS = SamplingParams(logprobs=True, extra_body={"top_logprobs": 5})
NATURAL = 2000  # long: a loaded machine still hangs up before the end


def falters(req: ScriptedRequest) -> ScriptedReply:
    """Choice 0 is sure for 20 tokens then unsure; choice 1 stays sure."""
    conf = (3.0,) * 20 + (0.5,) if req.sample_index == 0 else 3.0
    return ScriptedReply(content="It is \\boxed{4}", confidence=conf)


async def settled(srv: ThroughputServer) -> dict[str, Any]:
    stats: dict[str, Any] = {}
    for _ in range(100):
        stats = srv.stats()
        if stats["in_flight"] == 0:
            break
        await asyncio.sleep(0.02)
    return stats


def window_watch(threshold: float, window: int) -> Any:
    windows: dict[int, WindowConfidence] = {}

    def watch(index: int, entries: Sequence[Any]) -> bool:
        tracker = windows.setdefault(index, WindowConfidence(threshold, window))
        return tracker.push_entries(entries)

    return watch


async def test_a_stopped_choice_is_reported_dropped_with_its_tokens_and_cancelled_upstream() -> (
    None
):
    lengths = LengthModel(median=NATURAL, sigma=0.0)
    async with ThroughputServer(
        falters, throughput=2_000, per_sequence_cap=2_000, lengths=lengths, stream_chunk_tokens=8
    ) as srv:
        client = OpenAICompatClient(srv.base_url, "t", retry=ModelRetryPolicy(max_attempts=1))
        try:
            got = [
                item
                async for item in client.stream_each(
                    PROMPT, n=1, params=PARAMS, seed=1, watch=window_watch(2.0, 4)
                )
            ]
        finally:
            await client.aclose()
        stats = await settled(srv)
    ((index, outcome),) = got
    assert index == 0 and isinstance(outcome, Completion)
    # The window (3+3+1*0.5...) fell below 2.0 at token 22, inside the third 8-token event.
    assert outcome.finish_reason == STOPPED == "dropped"
    assert outcome.completion_tokens == 24 and not outcome.tokens_estimated
    assert len(outcome.logprobs["content"]) == 24
    assert outcome.reasoning is not None and outcome.content == ""  # stopped while thinking
    assert stats["choices_cancelled"] == 1  # the hang-up reached the server
    assert stats["tokens_generated"] < NATURAL


async def test_in_an_n_request_the_stopped_choice_ends_early_and_the_other_runs_on() -> None:
    lengths = LengthModel(median=80, sigma=0.0)
    async with ThroughputServer(
        falters, throughput=20_000, per_sequence_cap=20_000, lengths=lengths, stream_chunk_tokens=8
    ) as srv:
        client = OpenAICompatClient(srv.base_url, "t", retry=ModelRetryPolicy(max_attempts=1))
        try:
            got = [
                item
                async for item in client.stream_each(
                    PROMPT, n=2, params=PARAMS, seed=1, watch=window_watch(2.0, 4)
                )
            ]
        finally:
            await client.aclose()
        stats = await settled(srv)
    assert [i for i, _ in got] == [0, 1]
    stopped, finished = (o for _, o in got)
    assert isinstance(stopped, Completion) and isinstance(finished, Completion)
    assert stopped.finish_reason == "dropped" and stopped.completion_tokens == 24
    assert finished.finish_reason == "stop" and finished.completion_tokens == 80
    assert finished.content == "It is \\boxed{4}"
    assert stats["choices_cancelled"] == 0  # one request: the stop ended no decoding


def test_an_unwatched_stream_never_drops_and_a_watch_sees_only_new_entries() -> None:
    seen: list[int] = []

    def watch(index: int, entries: Sequence[Any]) -> bool:
        seen.append(len(entries))
        return False

    stream = ChoiceStream(1, watch=watch)
    entry = {"token": "a", "logprob": -1.0, "top_logprobs": []}
    chunk = b'{"choices":[{"index":0,"delta":{"content":"a "},"logprobs":{"content":[%s]}}]}'
    one = json.dumps(entry).encode()
    assert stream.feed(chunk % one, latency_s=0.0) == []
    assert stream.feed(chunk % b",".join([one, one]), latency_s=0.0) == []
    assert seen == [1, 2]
    assert not stream.abandoned
