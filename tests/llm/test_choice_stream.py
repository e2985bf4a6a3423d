"""Streamed ``n``-sample requests: each sample as its choice finishes, stragglers cut upstream.

Over real HTTP against the throughput server (samples finish in the order of
their drawn lengths, and its ``cancelled`` counter shows a disconnect reached
it) and the scripted server (responders by input: slow, failing or answering
one choice only by their sample's seed). The parser of the events is tested
on its own where a server cannot send the shape (no usage at all).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest

from pacore_graph import PaCoReConfig, ainvoke_pacore, build_pacore_graph
from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.errors import ModelCallError
from pacore_graph.llm.batching import SampleBatcher, streams_samples
from pacore_graph.llm.choice_stream import ChoiceStream
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.llm.multi_client import MultiEndpointClient
from pacore_graph.llm.sampling import SampleOutcome
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing import (
    LengthModel,
    ScriptedReply,
    ScriptedRequest,
    ScriptedServer,
    ThroughputServer,
)
from pacore_graph.testing.fake_client import FakeChatClient
from pacore_graph.values.records import Completion, PaCoReResult
from pacore_graph.values.seeds import explorer_seed

ONE_TRY = ModelRetryPolicy(max_attempts=1)
PARAMS = SamplingParams()
PROMPT = [{"role": "user", "content": "What is 2 + 2?"}]


def by_index(req: ScriptedRequest) -> str:
    return f"sample {req.sample_index} says \\boxed{{{req.sample_index}}}"


async def collect(
    client: OpenAICompatClient, n: int, seed: int | None = None
) -> list[tuple[int, SampleOutcome]]:
    return [item async for item in client.stream_each(PROMPT, n=n, params=PARAMS, seed=seed)]


async def settled_stats(base_url: str) -> dict[str, Any]:
    """The server's counters once nothing is in flight (disconnects land shortly after)."""
    stats: dict[str, Any] = {}
    async with aiohttp.ClientSession() as session:
        for _ in range(100):
            async with session.get(base_url + "/stats") as resp:
                stats = await resp.json()
            if stats["in_flight"] == 0:
                break
            await asyncio.sleep(0.05)
    return stats


# ----------------------------------------------------------------- the client


async def test_stream_each_reports_each_sample_as_its_choice_finishes() -> None:
    lengths = LengthModel(median=200, sigma=1.2)
    # 500 tokens/s a sequence: the drawn lengths (61 to 596 tokens) end at least 50 ms
    # apart, so a loaded machine cannot swap two of them (at 5,000 it did: 5 ms apart).
    async with ThroughputServer(
        by_index, throughput=20_000, per_sequence_cap=500, lengths=lengths
    ) as srv:
        client = OpenAICompatClient(srv.base_url, "throughput", retry=ONE_TRY)
        try:
            got = await collect(client, 6, seed=11)
            (joined,) = [await client.complete_each(PROMPT, n=6, params=PARAMS, seed=11)]
        finally:
            await client.aclose()
        requests = srv.requests
    drawn = [lengths.length(11, i, "") for i in range(6)]
    # Shortest first: each sample came out when its sequence ended, not with the last.
    assert [i for i, _ in got] == sorted(range(6), key=drawn.__getitem__)
    outcomes = dict(got)
    for i in range(6):
        c = outcomes[i]
        assert isinstance(c, Completion)
        assert c.content == f"sample {i} says \\boxed{{{i}}}"
        assert c.completion_tokens == drawn[i] and not c.tokens_estimated  # continuous usage
        assert c.seed == 11 and c.finish_reason == "stop" and c.prompt_tokens > 0
        assert c.reasoning and c.reasoning.split()[0] == "thinking"
        same = joined[i]
        assert isinstance(same, Completion)  # the JSON n=6 request says the same
        assert (same.content, same.reasoning) == (c.content, c.reasoning)
    latencies = [o.latency_s for _, o in got if isinstance(o, Completion)]
    assert latencies == sorted(latencies)
    assert requests == 2


async def test_closing_the_stream_cancels_the_rest_upstream() -> None:
    lengths = LengthModel(median=400, sigma=1.5)
    async with ThroughputServer(throughput=2_000, per_sequence_cap=1_000, lengths=lengths) as srv:
        client = OpenAICompatClient(srv.base_url, "throughput", retry=ONE_TRY)
        try:
            samples = client.stream_each(PROMPT, n=8, params=PARAMS, seed=3)
            first = [await anext(samples) for _ in range(2)]
            await samples.aclose()
            stats = await settled_stats(srv.base_url)
        finally:
            await client.aclose()
    assert len({i for i, _ in first}) == 2
    assert stats["sequences"] == 8 and stats["in_flight"] == 0
    assert stats["completed"] < 8 and stats["cancelled"] == 8 - stats["completed"]


async def test_a_server_that_ignores_n_gets_the_rest_asked_one_by_one() -> None:
    def by_seed(req: ScriptedRequest) -> str:
        return f"seed {req.seed}"

    async with ScriptedServer(by_seed, ignore_n=True) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", retry=ONE_TRY)
        try:
            got = dict(await collect(client, 3, seed=40))
        finally:
            await client.aclose()
        sent = [(r.body.get("seed"), r.body.get("stream")) for r in srv.requests]
    assert {i: o.content for i, o in got.items() if isinstance(o, Completion)} == {
        0: "seed 40",
        1: "seed 41",
        2: "seed 42",
    }
    # The streamed request (one choice back), then samples 1 and 2 alone, seed + j.
    assert sent[0] == (40, True) and sorted(sent[1:]) == [(41, None), (42, None)]
    assert client.supports_n is False


async def test_an_error_mid_stream_fails_the_unfinished_samples_only() -> None:
    async def second_breaks(req: ScriptedRequest) -> str:
        if req.sample_index == 0:
            return "early answer"
        await asyncio.sleep(0.3 if req.sample_index == 1 else 5.0)
        if req.sample_index == 1:
            raise RuntimeError("decoder crashed")
        return "never sent"

    async with ScriptedServer(second_breaks) as srv:
        client = OpenAICompatClient(
            srv.base_url, "scripted", retry=ModelRetryPolicy(max_attempts=3)
        )
        try:
            got = dict(await collect(client, 3))
        finally:
            await client.aclose()
        attempts = len(srv.requests)
    early = got[0]
    assert isinstance(early, Completion) and early.content == "early answer"
    for i in (1, 2):
        failed = got[i]
        assert isinstance(failed, ModelCallError)
        assert "mid-stream" in str(failed) and "decoder crashed" in str(failed)
    assert attempts == 1  # a sample was out already: no retry


async def test_a_failure_before_any_sample_is_retried() -> None:
    async with ScriptedServer(by_index, fail_first=1) as srv:
        client = OpenAICompatClient(
            srv.base_url, "scripted", retry=ModelRetryPolicy(max_attempts=2, initial_backoff=0.01)
        )
        try:
            got = dict(await collect(client, 2))
        finally:
            await client.aclose()
        statuses = [r.status for r in srv.requests]
    assert statuses == [500, 200]
    assert all(isinstance(o, Completion) for o in got.values()) and sorted(got) == [0, 1]


def test_without_usage_the_token_count_is_an_honest_estimate() -> None:
    stream = ChoiceStream(2, model="m")
    events = [
        {"choices": [{"index": 1, "delta": {"content": "a "}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": "hm"}}]},
        {"choices": [{"index": 1, "delta": {"content": "b"}, "finish_reason": "stop"}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]},
    ]
    out = [o for e in events for o in stream.feed(json.dumps(e).encode(), latency_s=0.1)]
    assert [i for i, _ in out] == [1, 0]
    done = out[0][1]
    assert isinstance(done, Completion)
    assert (done.content, done.completion_tokens, done.tokens_estimated) == ("a b", 2, True)
    cut = out[1][1]
    assert isinstance(cut, ModelCallError) and "no content" in str(cut)
    assert stream.feed(b"[DONE]", latency_s=0.2) == [] and stream.done


# ----------------------------------------------------------------- in the graph


async def run_graph(client: Any, **config: Any) -> PaCoReResult:
    graph = build_pacore_graph(client, config=PaCoReConfig(retry=ONE_TRY, **config))
    return await ainvoke_pacore(graph, "What is 2 + 2?")


async def test_quorum_keeps_one_request_per_round_and_cancels_the_stragglers() -> None:
    lengths = LengthModel(median=300, sigma=1.5)
    async with ThroughputServer(throughput=4_000, per_sequence_cap=1_000, lengths=lengths) as srv:
        client = OpenAICompatClient(srv.base_url, "throughput", retry=ONE_TRY)
        try:
            result = await run_graph(client, rounds=[8, 4], round_quorum=0.5)
        finally:
            await client.aclose()
        stats = await settled_stats(srv.base_url)
    notes = result.extra["round_control"]
    assert [n["closed_by"] for n in notes[:2]] == ["quorum 4/8", "quorum 2/4"]
    dropped = [len(n["dropped"]) for n in notes]
    # Samples that end in the same instant as the quorum's last one still count.
    assert 1 <= dropped[0] <= 4 and 1 <= dropped[1] <= 2 and dropped[2] == 0
    assert [len(r) for r in result.rounds] == [8 - dropped[0], 4 - dropped[1], 1]
    assert result.failures == 0
    assert stats["requests"] == 3  # one n=K request per round, final K=1 included
    assert stats["cancelled"] == sum(dropped)  # the server stopped decoding them


async def test_deadline_on_a_streamed_round() -> None:
    def two_fast(req: ScriptedRequest) -> ScriptedReply:
        return ScriptedReply(content=f"explorer {req.sample_index}")

    # Samples 0 and 1 are 20 tokens, the rest 20,000 (seconds at 1,000 tokens/s).
    class Lengths(LengthModel):
        def length(self, seed: int | None, sample_index: int, prompt: str) -> int:
            return 20 if sample_index < 2 or "Reference" in prompt else 20_000

    async with ThroughputServer(
        two_fast, throughput=100_000, per_sequence_cap=1_000, lengths=Lengths()
    ) as srv:
        client = OpenAICompatClient(srv.base_url, "throughput", retry=ONE_TRY)
        try:
            result = await run_graph(client, rounds=[5], round_deadline=0.5)
        finally:
            await client.aclose()
        stats = await settled_stats(srv.base_url)
    note = result.extra["round_control"][0]
    assert note["closed_by"] == "deadline 0.5s" and note["dropped"] == [2, 3, 4]
    assert [len(r) for r in result.rounds] == [2, 1]
    assert stats["requests"] == 2 and stats["cancelled"] == 3


async def test_an_error_mid_stream_is_recorded_as_failed_not_dropped() -> None:
    async def one_breaks(req: ScriptedRequest) -> str:
        if "Reference" in req.last_user or req.sample_index == 0:
            return "fine \\boxed{4}"
        await asyncio.sleep(0.2)
        raise RuntimeError("decoder crashed")

    async with ScriptedServer(one_breaks) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", retry=ONE_TRY)
        try:
            result = await run_graph(client, rounds=[3], round_deadline=30.0)
        finally:
            await client.aclose()
    first = result.rounds[0]
    assert [t.failed for t in first] == [False, True, True]
    assert all("decoder crashed" in (t.error or "") for t in first[1:])
    assert result.failures == 2 and result.extra["round_control"][0]["dropped"] == []
    assert result.answer == "fine \\boxed{4}"


async def test_without_round_control_the_plain_json_request_stays() -> None:
    async with ScriptedServer(by_index) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", retry=ONE_TRY)
        try:
            await run_graph(client, rounds=[4])
        finally:
            await client.aclose()
        bodies = [r.body for r in srv.requests]
    assert [(b.get("n"), b.get("stream")) for b in bodies] == [(4, None), (None, None)]


async def test_a_client_without_streamed_n_falls_back_to_one_request_per_explorer() -> None:
    async with ScriptedServer(by_index) as one, ScriptedServer(by_index) as two:
        client = MultiEndpointClient([one.base_url, two.base_url], "scripted", retry=ONE_TRY)
        try:
            result = await run_graph(client, rounds=[4], round_quorum=1.0)
        finally:
            await client.aclose()
        sent = [r.body.get("n") for r in (*one.requests, *two.requests)]
    assert not streams_samples(client)
    assert sent == [None] * 5 and len(result.rounds[0]) == 4


def test_the_batcher_streams_only_for_a_client_that_can() -> None:
    limiter = SequenceLimiter(8)
    fake = FakeChatClient()
    assert not SampleBatcher(fake, limiter, PARAMS, stream_samples=True).stream_samples
    direct = OpenAICompatClient("http://127.0.0.1:9/v1", "m")
    assert SampleBatcher(direct, limiter, PARAMS, stream_samples=True).stream_samples
    assert not SampleBatcher(direct, limiter, PARAMS).stream_samples


@pytest.mark.parametrize("quorum", [0.5, 2])
async def test_seeded_streamed_samples_carry_the_request_seed(quorum: float) -> None:
    async with ScriptedServer(by_index) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", retry=ONE_TRY)
        try:
            result = await run_graph(
                client, rounds=[4], round_quorum=quorum, sampling=SamplingParams(seed=7)
            )
        finally:
            await client.aclose()
        seeds = [r.body.get("seed") for r in srv.requests]
    # Round 0 is one request with explorer 0's seed; sample j stands for seed + j.
    assert seeds == [explorer_seed(7, r, 0) for r in range(len(result.schedule))]
    assert all(t.content.startswith("sample ") for t in result.rounds[0])


async def test_concurrent_choices_run_the_responders_of_a_request_together() -> None:
    peaks: dict[bool, int] = {}
    for concurrent in (False, True):
        running = peak = 0

        async def counting(req: ScriptedRequest) -> str:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            running -= 1
            return f"sample {req.sample_index}"

        async with ScriptedServer(counting, concurrent_choices=concurrent) as srv:
            client = OpenAICompatClient(srv.base_url, "scripted", retry=ONE_TRY)
            try:
                got = await client.complete(PROMPT, n=4, params=PARAMS)
            finally:
                await client.aclose()
        assert [c.content for c in got] == [f"sample {i}" for i in range(4)]
        peaks[concurrent] = peak
    assert peaks == {False: 1, True: 4}


# ----------------------------------------------------------------- the batcher on its own


async def test_the_batcher_resolves_each_caller_when_its_sample_is_done() -> None:
    lengths = LengthModel(median=300, sigma=1.5)
    async with ThroughputServer(
        by_index, throughput=4_000, per_sequence_cap=1_000, lengths=lengths
    ) as srv:
        client = OpenAICompatClient(srv.base_url, "throughput", retry=ONE_TRY)
        batcher = SampleBatcher(client, SequenceLimiter(64), PARAMS, stream_samples=True)
        order: list[int] = []

        async def caller(seed: int) -> Completion:
            c = await batcher.sample(PROMPT, group="g", expected=4, seed=seed)
            order.append(seed)
            return c

        try:
            got = await asyncio.gather(*(caller(20 + j) for j in range(4)))
        finally:
            await client.aclose()
        requests = srv.requests
    # One request; caller j got sample j (seed 20 + j), each as soon as it was done.
    assert requests == 1
    assert [c.content for c in got] == [f"sample {j} says \\boxed{{{j}}}" for j in range(4)]
    drawn = [lengths.length(20, j, "") for j in range(4)]
    assert order == [20 + j for j in sorted(range(4), key=drawn.__getitem__)]


async def test_the_request_lives_while_any_caller_waits_and_ends_when_none_does() -> None:
    lengths = LengthModel(median=20_000, sigma=0.1)  # 10+ seconds each: nothing finishes
    async with ThroughputServer(throughput=4_000, per_sequence_cap=2_000, lengths=lengths) as srv:
        client = OpenAICompatClient(srv.base_url, "throughput", retry=ONE_TRY)
        batcher = SampleBatcher(client, SequenceLimiter(64), PARAMS, stream_samples=True)
        callers = [
            asyncio.ensure_future(batcher.sample(PROMPT, group="g", expected=3, seed=j))
            for j in range(3)
        ]
        try:
            while (await settled_stats_now(srv.base_url))["in_flight"] < 3:
                await asyncio.sleep(0.02)
            callers[0].cancel()
            callers[1].cancel()
            await asyncio.sleep(0.2)
            still = await settled_stats_now(srv.base_url)
            callers[2].cancel()
            stats = await settled_stats(srv.base_url)
        finally:
            await client.aclose()
    assert still["in_flight"] == 3 and still["cancelled"] == 0  # caller 2 still waits
    assert stats["in_flight"] == 0 and stats["cancelled"] == 3  # nobody does: disconnected


async def settled_stats_now(base_url: str) -> dict[str, Any]:
    async with aiohttp.ClientSession() as session, session.get(base_url + "/stats") as resp:
        stats: dict[str, Any] = await resp.json()
    return stats


async def test_a_server_that_refuses_continuous_usage_is_asked_without_it() -> None:
    def refuse_option(req: ScriptedRequest) -> int | None:
        options = req.params.get("stream_options") or {}
        return 400 if options.get("continuous_usage_stats") else None

    async with ScriptedServer(by_index, fail_when=refuse_option) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", retry=ONE_TRY)
        try:
            first = dict(await collect(client, 2))
            again = dict(await collect(client, 2))
        finally:
            await client.aclose()
        statuses = [r.status for r in srv.requests]
    assert statuses == [400, 200, 200]  # refused once, then never asked for again
    for got in (first, again):
        c = got[1]
        assert isinstance(c, Completion) and c.content == "sample 1 says \\boxed{1}"
        # No per-choice usage: its deltas are counted (one here: four words per delta).
        assert c.tokens_estimated and c.completion_tokens == 1


async def test_a_bad_request_fails_every_sample_without_retries() -> None:
    def bad(req: ScriptedRequest) -> int | None:
        return 400

    async with ScriptedServer(by_index, fail_when=bad) as srv:
        client = OpenAICompatClient(
            srv.base_url, "scripted", retry=ModelRetryPolicy(max_attempts=3)
        )
        try:
            got = dict(await collect(client, 2))
        finally:
            await client.aclose()
        requests = len(srv.requests)
    assert sorted(got) == [0, 1]
    assert all(isinstance(o, ModelCallError) and o.status == 400 for o in got.values())
    assert requests == 2  # once with continuous usage, once without; no retries
