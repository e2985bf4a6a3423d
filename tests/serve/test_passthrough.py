"""Plain upstream model names through ``pacore serve``: relayed as they came, over real HTTP.

Two upstreams: a fixed one whose answers are exact bytes (so "unchanged" is
checked byte for byte, JSON and SSE), and the scripted server for the
``openai`` SDK, the caps and the queue.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from aiohttp import web
from responsive_support import Outcome, RSSPeak, post_json, watch_health
from serve_support import RunningServe, running_serve

from pacore_graph.serve import SERVED_MODELS, ServeSettings
from pacore_graph.serve.passthrough import MAX_MODEL_NAMES, MAX_REPLY_BYTES
from pacore_graph.settings.request_limits import RequestLimits
from pacore_graph.testing import ScriptedServer
from pacore_graph.testing.hostile_upstream import HostileServer, marker
from pacore_graph.testing.loopback_server import LoopbackServer

#: An answer no serializer of ours would produce: odd spacing, an extra field, key order.
FIXED_JSON = (
    b'{"id":"up-1",  "object":"chat.completion","created":1,"model":"plain-a",'
    b'"choices":[{"index":0,"message":{"role":"assistant","content":"42"},'
    b'"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,'
    b'"total_tokens":4},"x_upstream_only":[1,2]}'
)
FIXED_SSE = [
    b'data: {"id":"up-2","object":"chat.completion.chunk","choices":[{"index":0,'
    b'"delta":{"role":"assistant","content":""}}]}\n\n',
    b'data: {"id":"up-2","object":"chat.completion.chunk","choices":[{"index":0,'
    b'"delta":{"content":"4"}}]}\n\n',
    b'data: {"id":"up-2","object":"chat.completion.chunk","choices":[{"index":0,'
    b'"delta":{"content":"2"},"finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
]
LEAK = "secret-upstream-detail"


class FixedUpstream(LoopbackServer):
    """Answers fixed bytes and keeps each request's raw body."""

    def __init__(self) -> None:
        super().__init__(host="127.0.0.1", port=0, backlog=64)
        self.bodies: list[bytes] = []

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.bodies.append(raw)
        body = json.loads(raw)
        if body["messages"][-1]["content"] == "refuse":
            return web.Response(status=400, text=json.dumps({"error": {"message": LEAK}}))
        if not body.get("stream"):
            return web.Response(body=FIXED_JSON, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        pause = 0.5 if body["messages"][-1]["content"] == "slow" else 0.01
        for event in FIXED_SSE:
            await resp.write(event)
            await asyncio.sleep(pause)
        await resp.write_eof()
        return resp

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "plain-a"}, {"id": "plain-b"}]})

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response()


@pytest.fixture
def fixed() -> Iterator[tuple[FixedUpstream, RunningServe]]:
    with FixedUpstream().run_in_thread() as upstream:  # noqa: SIM117
        with running_serve(ServeSettings(upstreams=(upstream.base_url,), model="plain-a")) as srv:
            yield upstream, srv


def test_models_lists_the_upstreams_names_beside_pacores(
    fixed: tuple[FixedUpstream, RunningServe],
) -> None:
    _, srv = fixed
    ids = [m.id for m in openai.OpenAI(base_url=srv.base_url, api_key="x").models.list()]
    assert ids == [*SERVED_MODELS, "plain-a", "plain-b"]


def test_a_plain_name_is_relayed_byte_for_byte(fixed: tuple[FixedUpstream, RunningServe]) -> None:
    upstream, srv = fixed
    sent = b'{"model": "plain-b", "messages": [{"role": "user", "content": "q"}], "foo": 1}'
    resp = httpx.post(
        f"{srv.base_url}/chat/completions",
        content=sent,
        headers={"Content-Type": "application/json"},
    )
    assert resp.status_code == 200
    assert resp.content == FIXED_JSON
    # The request too: the body's bytes, a field PaCoRe would refuse ("foo") included.
    assert upstream.bodies == [sent]


def test_a_plain_stream_is_relayed_chunk_for_chunk(
    fixed: tuple[FixedUpstream, RunningServe],
) -> None:
    upstream, srv = fixed
    sent = {"model": "plain-a", "stream": True, "messages": [{"role": "user", "content": "q"}]}
    with httpx.stream("POST", f"{srv.base_url}/chat/completions", json=sent) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        received = b"".join(resp.iter_raw())
    assert received == b"".join(FIXED_SSE)
    assert json.loads(upstream.bodies[0]) == sent
    # And the SDK reads it as a stream.
    stream = openai.OpenAI(base_url=srv.base_url, api_key="x").chat.completions.create(
        model="plain-a", messages=[{"role": "user", "content": "q"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "42"
    stream.close()
    for _ in range(3000):  # the relay ends when the upstream's stream does
        if srv.state.active == 0:
            break
        time.sleep(0.01)
    metrics = httpx.get(f"http://127.0.0.1:{srv.server.config.port}/metrics").text
    assert 'pacore_runs_total{outcome="ok"} 2.0' in metrics  # [DONE] sent: answered


def test_a_client_leaving_a_relayed_stream_frees_its_slot(
    fixed: tuple[FixedUpstream, RunningServe],
) -> None:
    _, srv = fixed
    sent = {"model": "plain-a", "stream": True, "messages": [{"role": "user", "content": "slow"}]}
    with httpx.stream("POST", f"{srv.base_url}/chat/completions", json=sent) as resp:
        chunks = resp.iter_raw()  # held: a dropped iterator closes the response
        first = next(chunks)
        assert srv.state.active == 1
    assert first == FIXED_SSE[0]
    for _ in range(3000):
        if srv.state.active == 0:
            break
        time.sleep(0.01)
    assert srv.state.active == 0
    metrics = httpx.get(f"http://127.0.0.1:{srv.server.config.port}/metrics").text
    assert 'pacore_runs_total{outcome="cancelled"} 1.0' in metrics
    assert srv.state.passthrough is not None and srv.state.passthrough._in_flight == [0]


def test_an_upstream_refusal_keeps_its_status_not_its_text(
    fixed: tuple[FixedUpstream, RunningServe],
) -> None:
    _, srv = fixed
    sent = {"model": "plain-a", "messages": [{"role": "user", "content": "refuse"}]}
    resp = httpx.post(f"{srv.base_url}/chat/completions", json=sent)
    assert resp.status_code == 400
    assert LEAK not in resp.text and "127.0.0.1" not in resp.text
    assert resp.json()["error"]["code"] == "upstream_error"


def test_an_unknown_name_is_still_404(fixed: tuple[FixedUpstream, RunningServe]) -> None:
    upstream, srv = fixed
    sent = {"model": "gpt-nonesuch", "messages": [{"role": "user", "content": "q"}]}
    resp = httpx.post(f"{srv.base_url}/chat/completions", json=sent)
    assert resp.status_code == 404
    assert upstream.bodies == []


def test_no_passthrough_means_404_and_no_listing() -> None:
    with FixedUpstream().run_in_thread() as upstream:  # noqa: SIM117
        with running_serve(
            ServeSettings(upstreams=(upstream.base_url,), model="plain-a", passthrough=False)
        ) as srv:
            sent = {"model": "plain-a", "messages": [{"role": "user", "content": "q"}]}
            assert httpx.post(f"{srv.base_url}/chat/completions", json=sent).status_code == 404
            ids = [m["id"] for m in httpx.get(f"{srv.base_url}/models").json()["data"]]
    assert ids == list(SERVED_MODELS)
    assert upstream.bodies == []


def _scripted(upstream: ScriptedServer, **overrides: Any) -> ServeSettings:
    fields: dict[str, Any] = {"upstreams": (upstream.base_url,), "model": "scripted"}
    fields.update(overrides)
    return ServeSettings(**fields)


def test_the_sdk_gets_the_upstreams_own_answer_and_the_caps_still_apply() -> None:
    limits = RequestLimits(max_tokens_cap=64, max_samples_per_request=4)
    with ScriptedServer().run_in_thread() as upstream:  # noqa: SIM117
        with running_serve(_scripted(upstream, limits=limits)) as srv:
            client = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
            ask: list[Any] = [{"role": "user", "content": "What is 2+3?"}]
            relayed = client.chat.completions.create(
                model="scripted", messages=ask, max_tokens=64, seed=3
            )
            direct = openai.OpenAI(base_url=upstream.base_url, api_key="x").chat.completions
            same = direct.create(model="scripted", messages=ask, max_tokens=64, seed=3)
            calls_before = upstream.request_count
            with pytest.raises(openai.BadRequestError) as too_long:
                client.chat.completions.create(model="scripted", messages=ask, max_tokens=65)
            with pytest.raises(openai.BadRequestError) as too_many:
                client.chat.completions.create(model="scripted", messages=ask, n=5)
            metrics = httpx.get(f"http://127.0.0.1:{srv.server.config.port}/metrics").text
    assert relayed.choices[0].message.content == same.choices[0].message.content
    assert relayed.model == "scripted"
    assert "max_tokens" in str(too_long.value) and "'n'" in str(too_many.value)
    assert upstream.request_count == calls_before  # refused before anything was sent
    assert 'pacore_passthrough_requests_total{status="200",upstream="0"} 1.0' in metrics
    assert 'pacore_runs_total{outcome="ok"} 1.0' in metrics


async def test_relayed_requests_wait_in_the_same_queue() -> None:
    with ScriptedServer(latency=0.4).run_in_thread() as slow:  # noqa: SIM117
        with running_serve(_scripted(slow, max_concurrency=1, max_queue=0)) as srv:
            client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
            ask: list[Any] = [{"role": "user", "content": "q"}]
            first = asyncio.ensure_future(
                client.chat.completions.create(model="scripted", messages=ask)
            )
            for _ in range(3000):
                if srv.state.active == 1:
                    break
                await asyncio.sleep(0.01)
            with pytest.raises(openai.RateLimitError):
                await client.chat.completions.create(model="scripted", messages=ask)
            assert (await first).choices[0].message.content
            await client.close()
    assert slow.request_count == 1


# -- issue 31: what an upstream sends is bounded before it is kept ---------------------------


def _ask_hostile(srv: RunningServe, attack: str) -> httpx.Response:
    sent = {"model": "scripted", "messages": [{"role": "user", "content": marker(attack)}]}
    return httpx.post(f"{srv.base_url}/chat/completions", json=sent, timeout=120)


def test_an_answer_larger_than_a_read_buffer_is_relayed_whole() -> None:
    """Before: one ``read(n)`` gave what was buffered; 88 KB of 200 KB went out as a 200."""
    with HostileServer(size=200_000).run_in_thread() as upstream:  # noqa: SIM117
        with running_serve(_scripted(upstream)) as srv:
            resp = _ask_hostile(srv, "huge_body")
    assert resp.status_code == 200
    content = resp.json()["choices"][0]["message"]["content"]
    assert content == "a" * 200_000


@pytest.mark.parametrize(
    ("attack", "size", "kind"),
    [
        ("huge_body", MAX_REPLY_BYTES, "response too large"),  # sent past the cap
        ("huge_declared", MAX_REPLY_BYTES, "response too large"),  # declared past it
        ("gzip_bomb", MAX_REPLY_BYTES, "response too large"),  # past it once unpacked
        ("truncated_body", 200_000, "connection failed"),  # hung up halfway
    ],
)
def test_an_answer_over_the_cap_or_cut_short_is_a_clean_502(
    attack: str, size: int, kind: str
) -> None:
    with HostileServer(size=size).run_in_thread() as upstream:  # noqa: SIM117
        with running_serve(_scripted(upstream)) as srv:
            resp = _ask_hostile(srv, attack)
            after = httpx.post(
                f"{srv.base_url}/chat/completions",
                json={"model": "scripted", "messages": [{"role": "user", "content": "2+2?"}]},
            )
            active = srv.state.active
    assert resp.status_code == 502, resp.text[:300]
    error = resp.json()["error"]
    assert error["code"] == "upstream_error"
    assert kind in error["message"] and "127.0.0.1" not in resp.text
    assert upstream.attacks_sent == {attack: 1}
    assert after.status_code == 200 and active == 0  # the slot came back


def test_a_long_model_list_keeps_its_first_names_and_is_fetched_once() -> None:
    names = MAX_MODEL_NAMES + 5_000
    with HostileServer(model_names=names).run_in_thread() as upstream:  # noqa: SIM117
        with running_serve(_scripted(upstream)) as srv:

            async def main() -> list[httpx.Response]:
                async with httpx.AsyncClient(timeout=60) as client:
                    asks = [
                        client.post(
                            f"{srv.base_url}/chat/completions",
                            json={
                                "model": f"nope-{i}",
                                "messages": [{"role": "user", "content": "q"}],
                            },
                        )
                        for i in range(20)
                    ]
                    return await asyncio.gather(*asks, client.get(f"{srv.base_url}/models"))

            *refused, listed = asyncio.run(main())
            known = httpx.post(
                f"{srv.base_url}/chat/completions",
                json={"model": "model-000000007", "messages": [{"role": "user", "content": "q"}]},
            )
    assert [r.status_code for r in refused] == [404] * 20
    ids = [m["id"] for m in listed.json()["data"]]
    assert ids[: len(SERVED_MODELS)] == list(SERVED_MODELS)
    assert ids[len(SERVED_MODELS)] == "scripted"
    assert len(ids) == len(SERVED_MODELS) + MAX_MODEL_NAMES  # the upstream's first names
    assert ids[-1] == f"model-{MAX_MODEL_NAMES - 2:09d}"  # after "scripted", numbered from 0
    assert upstream.models_requests == 1  # one refresh for 21 requests waiting on it
    assert known.status_code == 200  # a kept name is relayed


def test_a_huge_model_list_is_skipped_with_the_servers_memory_bounded() -> None:
    """Before: 5M names took ``pacore serve`` to 2.39 GB and no answer in 120 s.

    The server runs in this process, so this process's resident memory is
    the server's growth (sampled while the requests are answered).
    """
    ask = json.dumps({"model": "nope", "messages": [{"role": "user", "content": "q"}]}).encode()
    with HostileServer(model_names=5_000_000).run_in_thread() as upstream:  # noqa: SIM117
        with running_serve(_scripted(upstream)) as srv, RSSPeak(os.getpid()) as rss:
            base = srv.base_url.removesuffix("/v1")
            jobs = [
                lambda: post_json(f"{srv.base_url}/chat/completions", ask),
                lambda: _get(f"{srv.base_url}/models"),
            ]
            watch = watch_health(f"{base}/health", jobs, timeout=120)
    refused, listed = watch.outcomes
    assert refused.status == 404, refused
    assert listed.status == 200, listed
    ids = [m["id"] for m in json.loads(listed.body)["data"]]
    assert ids == [*SERVED_MODELS, "scripted"]  # the list was skipped, --model stands
    assert max(refused.seconds, listed.seconds) < 30
    assert watch.worst_health_s < 1.0, watch
    assert upstream.models_requests == 1 and upstream.models_completed == 0  # read to the cap
    assert rss.growth < 100, (rss.before, rss.peak)


def _get(url: str) -> Outcome:
    started = time.monotonic()
    with httpx.Client(timeout=120) as client:
        resp = client.get(url)
    return Outcome(resp.status_code, resp.content, time.monotonic() - started)
