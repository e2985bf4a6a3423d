"""The multi-endpoint client against several real scripted servers.

Replies depend only on the request (last user message, sample index, seed);
which replica answered is read from each server's request log.
"""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import pytest
from hostile_support import SMALL, ask

from pacore_graph import build_pacore_graph
from pacore_graph.errors import InvalidPromptError, ModelCallError
from pacore_graph.graph.builder import ainvoke_pacore
from pacore_graph.llm.client import ChatClient, OpenAICompatClient
from pacore_graph.llm.multi_client import MultiEndpointClient, chat_client_for
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing import ScriptedRequest, ScriptedServer
from pacore_graph.testing.hostile_upstream import HostileServer

PARAMS = SamplingParams()
FAST = ModelRetryPolicy(max_attempts=4, initial_backoff=0.001, max_backoff=0.01)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def served(srv: ScriptedServer) -> int:
    """Samples a server answered with 200."""
    return sum(int(r.body.get("n", 1)) for r in srv.requests if r.status == 200)


async def test_is_a_chat_client_and_validates() -> None:
    client = MultiEndpointClient(["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"], "m")
    assert isinstance(client, ChatClient)
    with pytest.raises(ValueError, match="at least one"):
        MultiEndpointClient([], "m")
    with pytest.raises(ValueError, match="duplicate"):
        MultiEndpointClient(["http://a/v1", "http://a/v1/"], "m")
    with pytest.raises(ValueError, match="http"):
        MultiEndpointClient(["ftp://a"], "m")
    assert isinstance(chat_client_for(["http://a/v1"], "m"), OpenAICompatClient)
    assert isinstance(chat_client_for(["http://a/v1", "http://b/v1"], "m"), MultiEndpointClient)


async def test_least_outstanding_samples_spreads_concurrent_load() -> None:
    async with (
        ScriptedServer(latency=0.05) as a,
        ScriptedServer(latency=0.05) as b,
        ScriptedServer(latency=0.05) as c,
    ):
        client = MultiEndpointClient([a.base_url, b.base_url, c.base_url], "scripted", retry=FAST)
        try:
            outs = await asyncio.gather(
                *(client.complete(user(f"q{i}"), n=4, params=PARAMS) for i in range(30))
            )
        finally:
            await client.aclose()
    assert all(len(o) == 4 for o in outs)
    # 120 samples in flight together over three equal replicas: 40 each.
    assert [served(s) for s in (a, b, c)] == [40, 40, 40]
    assert [s.samples for s in client.stats()] == [40, 40, 40]


async def test_large_request_weighs_by_samples_not_requests() -> None:
    """One n=8 request in flight on A sends the next single samples to B."""
    async with ScriptedServer(latency=0.3) as a, ScriptedServer(latency=0.3) as b:
        client = MultiEndpointClient([a.base_url, b.base_url], "scripted", retry=FAST)
        try:
            big = asyncio.ensure_future(client.complete(user("big"), n=8, params=PARAMS))
            await asyncio.sleep(0.05)
            smalls = await asyncio.gather(
                *(client.complete(user(f"s{i}"), n=1, params=PARAMS) for i in range(5))
            )
            await big
        finally:
            await client.aclose()
    assert len(smalls) == 5
    big_on = a if any(r.body.get("n") == 8 for r in a.requests) else b
    other = b if big_on is a else a
    assert len(big_on.requests) == 1
    assert len(other.requests) == 5


async def test_refused_connection_fails_over_and_ejects() -> None:
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    async with ScriptedServer() as live:
        client = MultiEndpointClient([dead, live.base_url], "scripted", retry=FAST)
        try:
            outs = [await client.complete(user(f"q{i}"), params=PARAMS) for i in range(6)]
        finally:
            await client.aclose()
    assert all(o[0].content for o in outs)
    dead_stats, live_stats = client.stats()
    # The dead one was tried once, taken out, and not used again.
    assert dead_stats.requests == 1 and dead_stats.failures == 1
    assert not dead_stats.healthy and dead_stats.ejections == 1
    assert live_stats.samples == 6


async def test_5xx_fails_over_to_the_other_replica() -> None:
    def broken(req: ScriptedRequest) -> int | None:
        return 503

    async with ScriptedServer(fail_when=broken) as bad, ScriptedServer() as good:
        client = MultiEndpointClient(
            [bad.base_url, good.base_url], "scripted", retry=FAST, health_interval=30
        )
        try:
            outs = await asyncio.gather(
                *(client.complete(user(f"q{i}"), params=PARAMS) for i in range(4))
            )
        finally:
            await client.aclose()
    assert len(outs) == 4
    assert all(r.status == 503 for r in bad.requests)
    assert len(good.requests) == 4


async def test_4xx_is_not_retried_elsewhere() -> None:
    def bad_request(req: ScriptedRequest) -> int | None:
        return 400

    async with (
        ScriptedServer(fail_when=bad_request) as a,
        ScriptedServer(fail_when=bad_request) as b,
    ):
        client = MultiEndpointClient([a.base_url, b.base_url], "scripted", retry=FAST)
        try:
            with pytest.raises(ModelCallError, match="HTTP 400"):
                await client.complete(user("q"), params=PARAMS)
        finally:
            await client.aclose()
    assert len(a.requests) + len(b.requests) == 1
    assert all(s.healthy for s in client.stats())


async def test_all_replicas_down_gives_up_with_a_clear_error() -> None:
    urls = [f"http://127.0.0.1:{closed_port()}/v1" for _ in range(2)]
    client = MultiEndpointClient(urls, "m", retry=FAST, health_interval=30)
    try:
        with pytest.raises(ModelCallError, match="gave up after 4 attempts over 2 replicas"):
            await client.complete(user("q"), params=PARAMS)
    finally:
        await client.aclose()


async def test_health_check_readmits_a_replica_that_comes_back() -> None:
    port = closed_port()
    async with ScriptedServer() as live:
        client = MultiEndpointClient(
            [f"http://127.0.0.1:{port}/v1", live.base_url],
            "scripted",
            retry=FAST,
            health_interval=0.05,
        )
        try:
            await client.complete(user("first"), params=PARAMS)
            assert not client.stats()[0].healthy
            async with ScriptedServer(port=port) as revived:
                await client.wait_healthy(timeout=5)
                outs = await asyncio.gather(
                    *(client.complete(user(f"q{i}"), params=PARAMS) for i in range(10))
                )
                assert len(outs) == 10
                assert len(revived.requests) > 0
        finally:
            await client.aclose()


async def test_check_health_reports_each_replica() -> None:
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    async with ScriptedServer() as live:
        client = MultiEndpointClient([live.base_url, dead], "scripted", health_interval=30)
        try:
            assert await client.check_health() == [True, False]
            assert [s.healthy for s in client.stats()] == [True, False]
        finally:
            await client.aclose()


async def test_killing_one_of_two_replicas_mid_run_fails_no_problem() -> None:
    """A whole PaCoRe graph over two replicas; one stops while round 0 is in flight."""
    a = await ScriptedServer(latency=0.2).start()
    b = await ScriptedServer(latency=0.2).start()
    client = MultiEndpointClient([a.base_url, b.base_url], "scripted", retry=FAST)
    graph = build_pacore_graph(client, config={"rounds": [4, 2], "batch_samples": False})
    try:
        runs = asyncio.gather(
            *(ainvoke_pacore(graph, f"problem {i}", problem_id=str(i)) for i in range(8))
        )
        await asyncio.sleep(0.1)
        await a.stop()  # in-flight requests on A are cut off
        results = await runs
    finally:
        await client.aclose()
        await b.stop()
    assert all(r.failures == 0 for r in results)
    assert all(r.answer for r in results)
    stats = client.stats()
    assert stats[0].failures > 0 and not stats[0].healthy
    # Every sample of every round was eventually answered by B after the kill.
    assert stats[1].samples >= 8 * (2 + 1)


# --------------------------------------------------------------------------- the CLI


def test_pacore_run_with_repeated_base_url_uses_both(capsys: pytest.CaptureFixture[str]) -> None:
    from pacore_graph.cli import main

    with ScriptedServer().run_in_thread() as a, ScriptedServer().run_in_thread() as b:
        argv = ["run", "What is 2+2?", "--rounds", "6", "--no-batch", "--json", "--no-progress"]
        code = main([*argv, "--base-url", a.base_url, "--base-url", b.base_url, "--model", "m"])
        assert code == 0
        out = capsys.readouterr().out
        assert '"failures": 0' in out
        assert len(a.requests) > 0 and len(b.requests) > 0
        assert len(a.requests) + len(b.requests) == 6 + 1


def test_pacore_eval_with_a_dead_replica_still_answers(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from pacore_graph.cli import main
    from pacore_graph.eval.datasets import sample_questions_path

    data = sample_questions_path()
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    with ScriptedServer().run_in_thread() as live:
        code = main(
            [
                "eval",
                "--dataset",
                str(data),
                "--limit",
                "2",
                "--methods",
                "pacore:low",
                "--out",
                str(tmp_path / "out"),
                "--no-progress",
                "--base-url",
                dead,
                "--base-url",
                live.base_url,
                "--model",
                "m",
            ]
        )
        assert code == 0
        assert all(r.status == 200 for r in live.requests)
        assert sum(r.body.get("n", 1) for r in live.requests) == 2 * (4 + 1)
    capsys.readouterr()


def test_langchain_client_refuses_several_base_urls(capsys: pytest.CaptureFixture[str]) -> None:
    from pacore_graph.cli import main

    argv = ["run", "Q", "--client", "langchain", "--model", "m"]
    assert main([*argv, "--base-url", "http://a/v1", "--base-url", "http://b/v1"]) == 2
    assert "one --base-url" in capsys.readouterr().err


async def test_stream_fails_over_before_the_first_token() -> None:
    dead = f"http://127.0.0.1:{closed_port()}/v1"
    async with ScriptedServer(stream_words_per_chunk=1) as live:
        client = MultiEndpointClient([dead, live.base_url], "scripted", retry=FAST)
        deltas: list[tuple[str, str]] = []

        async def on_delta(kind: str, text: str) -> None:
            deltas.append((kind, text))

        try:
            # Both replicas idle: the rotation may pick either first; run twice.
            outs = [
                await client.stream(user(f"q{i}"), params=PARAMS, on_delta=on_delta)
                for i in range(2)
            ]
        finally:
            await client.aclose()
    assert all(o.content.startswith("The answer is") for o in outs)
    content = "".join(t for k, t in deltas if k == "content")
    assert content == "".join(o.content for o in outs)
    assert any(k == "reasoning" for k, _ in deltas)
    dead_stats, live_stats = client.stats()
    assert dead_stats.failures == 1 and not dead_stats.healthy
    assert live_stats.samples == 2
    assert all(r.body.get("stream") is True for r in live.requests)


def test_a_later_event_loop_health_checks_again() -> None:
    """Ejected in one asyncio.run, re-admitted by a probe in the next one."""
    port = closed_port()
    with ScriptedServer().run_in_thread() as live:
        client = MultiEndpointClient(
            [f"http://127.0.0.1:{port}/v1", live.base_url],
            "scripted",
            retry=FAST,
            health_interval=0.05,
        )

        async def call() -> None:
            await client.complete(user("q"), params=PARAMS)
            await client.aclose()  # this loop's sessions and probe end here

        asyncio.run(call())
        assert not client.stats()[0].healthy
        with ScriptedServer(port=port).run_in_thread():

            async def call_then_wait() -> None:
                await client.complete(user("q2"), params=PARAMS)
                await client.wait_healthy(timeout=5)
                await client.aclose()

            asyncio.run(call_then_wait())
        assert client.stats()[0].healthy


async def test_stream_without_server_usage_counts_its_deltas() -> None:
    """A server that ignores stream_options (llama.cpp) still yields a token count."""
    from aiohttp import web

    async def chat(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for piece in ("Four", " plus", " one", "."):
            event = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            await resp.write(f"data: {json.dumps(event)}\n\n".encode())
        done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        await resp.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    client = MultiEndpointClient([f"http://127.0.0.1:{port}/v1"], "m", retry=FAST)

    async def ignore(kind: str, text: str) -> None:
        return None

    try:
        out = await client.stream(user("q"), params=PARAMS, on_delta=ignore)
    finally:
        await client.aclose()
        await runner.cleanup()
    assert out.content == "Four plus one."
    assert out.completion_tokens == 4 and out.tokens_estimated
    assert out.finish_reason == "stop"


async def test_complete_each_fails_a_whole_request_over_to_another_replica() -> None:
    from pacore_graph.values.records import Completion

    dead = f"http://127.0.0.1:{closed_port()}/v1"
    async with ScriptedServer() as live:
        client = MultiEndpointClient([dead, live.base_url], "scripted", retry=FAST)
        try:
            outcomes = await client.complete_each(user("q"), n=3, params=PARAMS, seed=4)
        finally:
            await client.aclose()
    assert len(outcomes) == 3 and all(isinstance(o, Completion) for o in outcomes)
    assert served(live) == 3
    assert client.stats()[0].failures == 1


async def test_every_replica_busy_waits_for_retry_after_before_going_round_again() -> None:
    # Both replicas answer 429 once with Retry-After: 0.4. The second round of
    # tries must wait for it (the client's own rule), not the 1 ms backoff.
    async with (
        ScriptedServer(fail_first=1, failure_status=429, retry_after=0.4) as a,
        ScriptedServer(fail_first=1, failure_status=429, retry_after=0.4) as b,
    ):
        client = MultiEndpointClient([a.base_url, b.base_url], "scripted", retry=FAST)
        try:
            loop = asyncio.get_running_loop()
            started = loop.time()
            (out,) = await client.complete(user("Q"), params=PARAMS)
            waited = loop.time() - started
        finally:
            await client.aclose()
    assert out.content
    assert sorted(r.status for r in [*a.requests, *b.requests]) == [200, 429, 429]
    assert waited >= 0.4, "went round the replicas again before their Retry-After"


# --------------------------------------------------------------------------- hostile replicas


async def test_replica_errors_name_their_replica_by_index() -> None:
    async with HostileServer(attack="index_string") as bad, HostileServer() as good:
        client = MultiEndpointClient([good.base_url, bad.base_url], "m", retry=FAST)
        try:
            seen: dict[int | None, str] = {}
            for q in range(4):  # least-outstanding rotation reaches both replicas
                prompt = [{"role": "user", "content": f"q{q}"}]
                for outcome in await client.complete_each(prompt, n=1, params=SMALL):
                    if isinstance(outcome, ModelCallError):
                        seen[outcome.upstream] = outcome.public_message()
        finally:
            await client.aclose()
    assert seen == {1: "upstream 1 call failed: malformed reply"}
    assert all(r.healthy for r in client.stats())  # a bad answer does not eject the replica


async def test_a_prompt_that_cannot_be_sent_takes_no_replica_out() -> None:
    """Our own bad input (a lone surrogate) is not a replica's failure: none is ejected."""

    async def ignore(kind: str, text: str) -> None:
        return None

    async with ScriptedServer() as a, ScriptedServer() as b:
        client = MultiEndpointClient([a.base_url, b.base_url], "scripted", retry=FAST)
        try:
            for _ in range(2):
                with pytest.raises(InvalidPromptError):
                    await client.complete_each(user("caf\udce9"), n=2, params=PARAMS)
                with pytest.raises(InvalidPromptError):
                    await client.stream(user("caf\udce9"), params=PARAMS, on_delta=ignore)
            good = await client.complete(user("q"), params=PARAMS)
        finally:
            await client.aclose()
    assert good[0].content
    assert [s.ejections for s in client.stats()] == [0, 0]
    assert all(s.healthy for s in client.stats())
    assert len(a.requests) + len(b.requests) == 1  # the bad prompt was never sent


async def test_a_replica_stream_error_names_its_replica() -> None:
    async def ignore(kind: str, text: str) -> None:
        return None

    async with HostileServer(attack="sse_content_not_string") as bad:
        client = MultiEndpointClient([bad.base_url], "m", retry=FAST)
        try:
            with pytest.raises(ModelCallError) as caught:
                await client.stream(ask("sse_content_not_string"), params=SMALL, on_delta=ignore)
        finally:
            await client.aclose()
    assert caught.value.kind == "malformed" and caught.value.upstream == 0
    assert caught.value.public_message() == "upstream 0 call failed: malformed reply"
