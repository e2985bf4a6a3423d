"""The chat clients against a real HTTP server (the scripted one, or a tiny aiohttp app).

:class:`OpenAICompatClient` (direct aiohttp) throughout; tests marked ``BOTH``
also run :class:`LangChainChatClient` over the ``ChatOpenAI`` that
``make_chat_model`` builds (what only that client does is in
``test_langchain_client.py``, the API key in ``test_credentials.py``). Replies
depend only on the request (last user message, sample index), never on call
order.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from llm_support import (
    BOTH,
    PARAMS,
    ClientFactory,
    closed_port,
    direct,
    graded,
    one_choice_server,
    serving,
    user,
)

from pacore_graph.errors import ModelCallError, UpstreamTransportError
from pacore_graph.llm.client import ChatClient, OpenAICompatClient
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing import (
    DISCONNECT_STATUS,
    ScriptedRequest,
    ScriptedServer,
    count_tokens,
)
from pacore_graph.values.records import Completion


async def server_usage(srv: ScriptedServer, body: dict[str, Any]) -> dict[str, int]:
    """Replay a logged body to the (deterministic) server and read its usage block."""
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{srv.base_url}/chat/completions", json=body) as resp,
    ):
        data = await resp.json()
    usage: dict[str, int] = data["usage"]
    return usage


# --------------------------------------------------------------------------- n choices


@BOTH
async def test_n_choices_come_from_one_request(make_client: ClientFactory) -> None:
    async with ScriptedServer(graded) as srv, make_client(srv.base_url) as client:
        assert isinstance(client, ChatClient)
        params = SamplingParams(max_tokens=8)
        out = await client.complete(user("q7"), n=3, params=params)
        log = list(srv.requests)
        assert len(log) == 1
        assert log[0].body["n"] == 3
        # langchain-openai sends the newer name; the server honours both.
        assert log[0].body.get("max_tokens", log[0].body.get("max_completion_tokens")) == 8
        assert log[0].status == 200
        # Per-choice content, in choice order.
        assert [c.content.split(":")[0] for c in out] == ["q7/0", "q7/1", "q7/2"]
        # Per-choice finish reasons: samples have 4, 7 and 11 words; max_tokens=8
        # cuts only the last.
        assert [c.finish_reason for c in out] == ["stop", "stop", "length"]
        # Usage: the per-sample shares sum exactly to the server's total.
        usage = await server_usage(srv, log[0].body)
        assert usage["completion_tokens"] == 4 + 7 + 8
        assert sum(c.completion_tokens for c in out) == usage["completion_tokens"]
        assert all(c.prompt_tokens == usage["prompt_tokens"] for c in out)
        assert all(c.tokens_estimated for c in out)
        # Shares follow text length: the longer sample gets more tokens.
        assert out[0].completion_tokens < out[2].completion_tokens


@BOTH
async def test_single_sample_has_exact_usage(make_client: ClientFactory) -> None:
    async with ScriptedServer(graded) as srv, make_client(srv.base_url) as client:
        (c,) = await client.complete(user("solo"), n=1, params=PARAMS)
        assert "n" not in srv.requests[0].body or srv.requests[0].body["n"] == 1
        assert c.completion_tokens == count_tokens(c.content) + count_tokens(c.reasoning)
        assert c.tokens_estimated is False
        assert c.finish_reason == "stop"


@BOTH
async def test_sampling_fields_and_seed_are_sent(make_client: ClientFactory) -> None:
    async with ScriptedServer(graded) as srv, make_client(srv.base_url) as client:
        params = SamplingParams(temperature=0.3, top_p=0.9)
        await client.complete(user("s"), n=2, params=params, seed=1234)
        body = srv.requests[0].body
        assert body["temperature"] == 0.3
        assert body["top_p"] == 0.9
        assert body["seed"] == 1234
        assert body["model"] == "scripted"
        assert body["messages"] == user("s")


# --------------------------------------------------------------------------- reasoning


@BOTH
@pytest.mark.parametrize("mode", ["reasoning", "reasoning_content"])
async def test_reasoning_field_is_captured(make_client: ClientFactory, mode: str) -> None:
    async with (
        ScriptedServer(graded, reasoning_mode=mode) as srv,  # type: ignore[arg-type]
        make_client(srv.base_url) as client,
    ):
        out = await client.complete(user("r"), n=2, params=PARAMS)
        assert [c.reasoning for c in out] == ["why-0", "why-1"]
        assert all("why-" not in c.content for c in out)


async def test_reasoning_modes_without_a_separate_field() -> None:
    async with ScriptedServer(graded, reasoning_mode="none") as srv, direct(srv.base_url) as c:
        (none,) = await c.complete(user("x"), params=PARAMS)
    assert none.reasoning is None
    async with ScriptedServer(graded, reasoning_mode="think") as srv, direct(srv.base_url) as c:
        (think,) = await c.complete(user("x"), params=PARAMS)
    assert think.reasoning is None
    assert think.content.startswith("<think>why-0</think>")


# --------------------------------------------------------------------------- retries


async def test_fail_first_two_succeeds_on_third_attempt() -> None:
    async with ScriptedServer(graded, fail_first=2) as srv, direct(srv.base_url) as client:
        (c,) = await client.complete(user("retry me"), params=PARAMS)
        assert c.content.startswith("retry me/0")
        assert [r.status for r in srv.requests] == [500, 500, 200]
        # A retry resends the same request.
        assert srv.requests[0].body == srv.requests[2].body


async def test_fail_first_beyond_max_attempts_gives_up() -> None:
    retry = ModelRetryPolicy(max_attempts=2, initial_backoff=0.0)
    async with (
        ScriptedServer(graded, fail_first=5) as srv,
        direct(srv.base_url, retry=retry) as client,
    ):
        with pytest.raises(ModelCallError) as info:
            await client.complete(user("x"), params=PARAMS)
        assert info.value.status == 500
        assert info.value.attempts == 2
        assert "gave up after 2 attempts" in str(info.value)
        assert [r.status for r in srv.requests] == [500, 500]


async def test_429_is_retried() -> None:
    def rate_limited(req: ScriptedRequest) -> int | None:
        return 429 if req.attempt == 0 else None

    async with (
        ScriptedServer(graded, fail_when=rate_limited) as srv,
        direct(srv.base_url) as client,
    ):
        out = await client.complete(user("busy"), n=2, params=PARAMS)
        assert len(out) == 2
        assert [r.status for r in srv.requests] == [429, 200]


async def test_400_is_not_retried() -> None:
    async with (
        ScriptedServer(graded, fail_when=lambda req: 400) as srv,
        direct(srv.base_url) as client,
    ):
        with pytest.raises(ModelCallError) as info:
            await client.complete(user("bad"), params=PARAMS)
        assert len(srv.requests) == 1
        assert info.value.status == 400
        assert info.value.retryable is False
        assert info.value.attempts == 1
        assert "HTTP 400" in str(info.value)


async def test_disconnect_is_retried_then_recovers() -> None:
    async with (
        ScriptedServer(graded, fail_first=1, failure_mode="disconnect") as srv,
        direct(srv.base_url) as client,
    ):
        (c,) = await client.complete(user("flaky"), params=PARAMS)
        assert c.content.startswith("flaky/0")
        assert [r.status for r in srv.requests] == [DISCONNECT_STATUS, 200]


async def test_disconnect_every_time_raises_with_the_url() -> None:
    retry = ModelRetryPolicy(max_attempts=3, initial_backoff=0.001)
    async with (
        ScriptedServer(graded, fail_when=lambda req: 500, failure_mode="disconnect") as srv,
        direct(srv.base_url, retry=retry) as client,
    ):
        with pytest.raises(ModelCallError) as info:
            await client.complete(user("gone"), params=PARAMS)
        assert [r.status for r in srv.requests] == [DISCONNECT_STATUS] * 3
        message = str(info.value)
        assert f"{srv.base_url}/chat/completions" in message
        assert "gave up after 3 attempts" in message
        assert info.value.retryable is True


async def test_unreachable_server_cannot_reach() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    retry = ModelRetryPolicy(max_attempts=2, initial_backoff=0.001)
    async with direct(url, retry=retry) as client:
        with pytest.raises(ModelCallError) as info:
            await client.complete(user("anyone?"), params=PARAMS)
    message = str(info.value)
    assert "cannot reach" in message
    assert f"{url}/chat/completions" in message
    assert info.value.attempts == 2
    assert type(info.value) is UpstreamTransportError and info.value.server_wide


# --------------------------------------------------------------------------- servers ignoring n


async def test_direct_client_tops_up_when_server_ignores_n() -> None:
    async with one_choice_server() as (url, bodies), direct(url) as client:
        out = await client.complete(user("Q"), n=4, params=PARAMS)
        assert len(out) == 4
        assert all(c.content == "single answer to Q" for c in out)
        assert all(c.completion_tokens == 4 for c in out)
        assert [b.get("n") for b in bodies] == [4, None, None, None]
        assert client.supports_n is False
        # Once known, later calls do not ask for n at all.
        bodies.clear()
        assert len(await client.complete(user("Q2"), n=2, params=PARAMS)) == 2
        assert [b.get("n") for b in bodies] == [None, None]


async def test_direct_client_supports_n_is_learned() -> None:
    async with ScriptedServer(graded) as srv, direct(srv.base_url) as client:
        assert client.supports_n is None
        await client.complete(user("x"), n=2, params=PARAMS)
        assert client.supports_n is True


# --------------------------------------------------------------------------- API key


# --------------------------------------------------------------------------- misc


async def test_direct_client_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="http"):
        OpenAICompatClient("localhost:8000/v1", "m")
    with pytest.raises(ValueError, match="model"):
        OpenAICompatClient("http://localhost:8000/v1", "")
    async with ScriptedServer(graded) as srv, direct(srv.base_url) as client:
        with pytest.raises(ValueError, match="n must be"):
            await client.complete(user("x"), n=0, params=PARAMS)
        assert srv.request_count == 0


async def test_completion_records_model_and_latency() -> None:
    """The latency is the call's: it holds the server's own delay and fits inside the call.

    Bounds are relations between the same clock's readings (the server's
    delay, the time around the call), never a threshold a slow machine misses.
    """
    delay = 0.02
    async with ScriptedServer(graded, latency=delay) as srv, direct(srv.base_url) as client:
        clock = asyncio.get_running_loop().time
        before = clock()
        out: list[Completion] = await client.complete(user("t"), n=2, params=PARAMS)
        around = clock() - before
    assert all(c.model == "scripted" for c in out)
    resolution = time.get_clock_info("monotonic").resolution
    assert all(delay - resolution <= c.latency_s <= around for c in out)


# --------------------------------------------------------------------------- streams without usage


@asynccontextmanager
async def usageless_stream_server(deltas: list[str]) -> AsyncIterator[str]:
    """llama.cpp's Python server: streams SSE deltas and ignores ``include_usage``."""

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        assert body["stream"] is True
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i, text in enumerate(deltas):
            finish = "stop" if i == len(deltas) - 1 else None
            chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async with serving(chat) as base_url:
        yield base_url


async def test_a_stream_without_usage_counts_its_deltas_as_an_estimate() -> None:
    deltas = ["The", " answer", " is", " 5"]
    seen: list[str] = []

    async def on_delta(kind: str, text: str) -> None:
        seen.append(text)

    async with usageless_stream_server(deltas) as url, direct(url) as client:
        out = await client.stream(user("Q"), params=PARAMS, on_delta=on_delta)
    assert out.content == "The answer is 5"
    assert seen == deltas
    # Not a free final round: one token per streamed delta, flagged as estimated.
    assert out.completion_tokens == len(deltas)
    assert out.tokens_estimated is True
