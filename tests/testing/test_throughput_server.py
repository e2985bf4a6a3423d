"""The throughput-bound server: its length model and its HTTP face (the sharing arithmetic:
``test_processor_sharing.py``)."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from pacore_graph.testing import LengthModel, ThroughputServer

REPO_ROOT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------- lengths


def test_lengths_follow_the_seed_and_choice_when_seeded() -> None:
    model = LengthModel(median=60, sigma=1.0)
    assert model.length(7, 0, "a") == model.length(7, 0, "b")  # the seed decides, not the prompt
    draws = {model.length(7, i, "a") for i in range(20)}
    assert len(draws) > 5  # choices of one seeded request differ


def test_lengths_without_a_seed_follow_the_prompt_and_choice() -> None:
    model = LengthModel(median=60, sigma=1.0)
    assert model.length(None, 3, "a") == model.length(None, 3, "a")
    assert [model.length(None, i, "a") for i in range(10)] != [
        model.length(None, i, "b") for i in range(10)
    ]


def test_lengths_are_lognormal_around_the_median() -> None:
    model = LengthModel(median=60, sigma=1.0)
    draws = [model.length(s, 0, "") for s in range(4001)]
    assert 54 <= statistics.median(draws) <= 66
    assert max(draws) > 10 * 60  # heavy tail: exp(3 sigma) ~ 20x the median
    assert LengthModel(median=60, sigma=0.0).length(1, 0, "") == 60
    assert LengthModel(median=60, sigma=3.0, max_length=100).length(1, 0, "") <= 100


# ----------------------------------------------------------------- over HTTP


def _client(srv: ThroughputServer, timeout: float = 30.0) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=srv.base_url, api_key="x", max_retries=0, timeout=timeout)


async def _stats(srv: ThroughputServer) -> dict[str, Any]:
    url = srv.base_url.removesuffix("/v1") + "/stats"
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        assert resp.status == 200
        data: dict[str, Any] = await resp.json()
        return data


async def test_n_choices_have_their_drawn_lengths_and_the_server_counts_them() -> None:
    lengths = LengthModel(median=40, sigma=0.8)
    async with ThroughputServer(throughput=100_000, lengths=lengths) as srv:
        async with _client(srv) as client:
            reply = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "2+2?"}], n=5, seed=11
            )
        stats = await _stats(srv)
    want = [lengths.length(11, i, "") for i in range(5)]
    got = [
        len((c.message.content or "").split())
        + len((getattr(c.message, "reasoning", None) or "").split())
        for c in reply.choices
    ]
    assert got == want
    assert all(c.message.content and "answer" in c.message.content for c in reply.choices)
    assert reply.usage is not None and reply.usage.completion_tokens == sum(want)
    assert stats["tokens_generated"] == sum(want)
    assert (stats["requests"], stats["sequences"], stats["completed"]) == (1, 5, 5)
    assert stats["peak_in_flight"] == 5  # one request's choices decode together
    assert stats["physical_limit_seconds"] == pytest.approx(sum(want) / 100_000)
    # Busy time can never beat the physical limit.
    assert stats["busy_seconds"] >= stats["physical_limit_seconds"] * 0.99


async def test_same_seed_same_lengths_across_requests() -> None:
    async with ThroughputServer(throughput=100_000) as srv, _client(srv) as client:
        msgs: Any = [{"role": "user", "content": "q"}]
        a = await client.chat.completions.create(model="m", messages=msgs, n=3, seed=5)
        b = await client.chat.completions.create(model="m", messages=msgs, n=3, seed=5)
        c = await client.chat.completions.create(model="m", messages=msgs, n=3, seed=6)
    usage = [r.usage.completion_tokens if r.usage else -1 for r in (a, b, c)]
    assert usage[0] == usage[1] != usage[2]


async def test_unseeded_samples_of_one_prompt_draw_the_same_lengths_batched_or_not() -> None:
    msgs: Any = [{"role": "user", "content": "same prompt"}]
    async with ThroughputServer(throughput=100_000) as srv, _client(srv) as client:
        batched = await client.chat.completions.create(model="m", messages=msgs, n=4)
        async with aiohttp.ClientSession() as session:
            await session.post(srv.base_url + "/stats/reset")
        singles = [await client.chat.completions.create(model="m", messages=msgs) for _ in range(4)]
    assert batched.usage is not None
    lengths = [s.usage.completion_tokens for s in singles if s.usage]
    assert len(set(lengths)) > 1  # four samples, not four copies
    assert sum(lengths) == batched.usage.completion_tokens


async def test_max_tokens_truncates_with_finish_reason_length() -> None:
    lengths = LengthModel(median=500, sigma=0.0)
    async with ThroughputServer(throughput=100_000, lengths=lengths) as srv:
        async with _client(srv) as client:
            reply = await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "q"}], max_tokens=30
            )
        stats = await _stats(srv)
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None and reply.usage.completion_tokens == 30
    assert stats["tokens_generated"] == 30


async def test_a_client_that_goes_away_cancels_its_sequences() -> None:
    lengths = LengthModel(median=1_000_000, sigma=0.0)  # would take 1,000 s
    async with ThroughputServer(throughput=1000, per_sequence_cap=1000, lengths=lengths) as srv:
        async with _client(srv, timeout=0.3) as client:
            with pytest.raises(openai.APITimeoutError):
                await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "q"}], n=2
                )
        for _ in range(200):
            stats = await _stats(srv)
            if stats["cancelled"] == 2:
                break
            await asyncio.sleep(0.05)
    assert stats["cancelled"] == 2 and stats["in_flight"] == 0 and stats["completed"] == 0
    assert 0 < stats["tokens_generated"] < 2_000_000


async def test_bad_requests_get_a_clear_400() -> None:
    async with ThroughputServer() as srv, aiohttp.ClientSession() as session:
        url = f"{srv.base_url}/chat/completions"
        for body, needle in (
            ({"model": "m", "messages": [{"role": "user", "content": "q"}], "n": 0}, "'n'"),
            ({"model": "m", "messages": []}, "messages"),
        ):
            async with session.post(url, json=body) as resp:
                assert resp.status == 400
                assert needle in (await resp.json())["error"]["message"]


async def test_stats_reset_zeroes_the_counters() -> None:
    async with ThroughputServer(throughput=100_000) as srv:
        async with _client(srv) as client:
            await client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "q"}]
            )
        url = srv.base_url + "/stats/reset"
        async with aiohttp.ClientSession() as session, session.post(url) as resp:
            after = await resp.json()
    assert after["tokens_generated"] == 0 and after["requests"] == 0


def test_runs_as_its_own_process_and_reports_ready() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pacore_graph.testing.throughput_server", "--median", "10"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("READY http://127.0.0.1:")
        base_url = line.split()[1]

        async def call() -> dict[str, Any]:
            async with openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0) as c:
                await c.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "q"}], n=2
                )
            async with aiohttp.ClientSession() as session, session.get(base_url + "/stats") as r:
                data: dict[str, Any] = await r.json()
                return data

        stats = asyncio.run(call())
        assert stats["sequences"] == 2 and stats["tokens_generated"] > 0
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_runs_in_a_thread_for_sync_code() -> None:
    """The lifecycle it shares with ScriptedServer: a private loop in a thread, then stopped."""
    server = ThroughputServer(lengths=LengthModel(median=5))
    with server.run_in_thread() as srv:
        client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
        reply = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "q"}], n=3
        )
        client.close()
        assert len(reply.choices) == 3
        with urllib.request.urlopen(srv.base_url + "/stats", timeout=10) as response:
            assert json.loads(response.read())["sequences"] == 3
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url
