"""``pacore serve`` with real clients over real HTTP.

The app runs under uvicorn in a thread (``serve_support``); upstreams are
scripted servers whose replies depend only on the request (last user message,
sample index, seed). Clients: the ``openai`` SDK (sync, async, streaming),
LangChain's ``ChatOpenAI``, and raw HTTP for the error cases. The SIGTERM
drain test starts ``pacore serve`` as a real subprocess.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import httpx
import openai
import pytest
from langchain_openai import ChatOpenAI
from serve_support import RunningServe, free_port, running_serve, serve_process, serve_settings

from pacore_graph import build_pacore_graph
from pacore_graph.graph.builder import ainvoke_pacore
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.serve import SERVED_MODELS, ServeSettings
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing import ScriptedServer
from pacore_graph.values.seeds import explorer_seed

KEY = "sk-serve-test-7"
FAST = ModelRetryPolicy(max_attempts=4, initial_backoff=0.001, max_backoff=0.01)
QUESTION = "What is 17 + 25?"


def settings(*upstreams: Any, **overrides: Any) -> ServeSettings:
    return serve_settings(*upstreams, **{"retry": FAST, **overrides})


@pytest.fixture
def upstream() -> Iterator[ScriptedServer]:
    with ScriptedServer().run_in_thread() as srv:
        yield srv


@pytest.fixture
def served(upstream: ScriptedServer) -> Iterator[RunningServe]:
    with running_serve(settings(upstream, api_key=KEY)) as srv:
        yield srv


def sdk(srv: RunningServe, key: str = KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.base_url, api_key=key, max_retries=0)


async def library_result(upstream: ScriptedServer, rounds: list[int], seed: int) -> Any:
    """The same run through the library in-process, for comparison."""
    client = OpenAICompatClient(upstream.base_url, "scripted", retry=FAST)
    graph = build_pacore_graph(
        client, config={"rounds": rounds, "sampling": SamplingParams(seed=seed)}
    )
    try:
        return await ainvoke_pacore(graph, QUESTION)
    finally:
        await client.aclose()


# --------------------------------------------------------------------------- settings


def test_settings_validate() -> None:
    with pytest.raises(ValueError, match="upstream"):
        ServeSettings(upstreams=(), model="m")
    with pytest.raises(ValueError, match="http"):
        ServeSettings(upstreams=("localhost:8000",), model="m")
    with pytest.raises(ValueError, match="max-concurrency"):
        ServeSettings(upstreams=("http://a/v1",), model="m", max_concurrency=0)


# --------------------------------------------------------------------------- openai SDK


def test_models_listed(served: RunningServe) -> None:
    ids = [m.id for m in sdk(served).models.list()]
    # The served methods (PaCoRe's presets, each other method's bare name beside
    # its default spec), then the upstream's own model (passed through by name).
    assert ids == [*SERVED_MODELS, "scripted"]
    assert ids[:5] == ["pacore-low", "pacore-medium", "pacore-high", "rsa", "rsa:16,4,10"]


def test_completion_matches_the_library(served: RunningServe, upstream: ScriptedServer) -> None:
    reply = sdk(served).chat.completions.create(
        model="pacore:3,2", messages=[{"role": "user", "content": QUESTION}], seed=11
    )
    expected = asyncio.run(library_result(upstream, [3, 2], seed=11))
    message = reply.choices[0].message
    assert message.content == expected.answer
    assert message.model_extra is not None
    assert message.model_extra["reasoning_content"] == expected.reasoning
    assert reply.model == "pacore:3,2"
    assert reply.choices[0].finish_reason == "stop"
    usage = reply.usage
    assert usage is not None
    assert usage.completion_tokens == expected.effective_ttc
    assert usage.prompt_tokens == sum(t.prompt_tokens for t in expected.trajectories)
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    rounds = (usage.model_extra or {})["rounds"]
    assert [r["width"] for r in rounds] == [3, 2, 1]
    assert [r["completion_tokens"] for r in rounds] == list(expected.ttc_per_round)
    assert sum(r["completion_tokens"] for r in rounds) == usage.completion_tokens


def test_sampling_fields_reach_every_upstream_call(
    served: RunningServe, upstream: ScriptedServer
) -> None:
    sdk(served).chat.completions.create(
        model="pacore-low",
        messages=[{"role": "user", "content": QUESTION}],
        temperature=0.3,
        top_p=0.9,
        max_tokens=50,
        seed=5,
    )
    bodies = [r.body for r in upstream.requests]
    assert sum(b.get("n", 1) for b in bodies) == 4 + 1
    for b in bodies:
        assert (b["temperature"], b["top_p"], b["max_tokens"]) == (0.3, 0.9, 50)
        assert b["model"] == "scripted"
    # pacore-low runs rounds 4 then 1, each one request with its first explorer's seed
    assert sorted(b["seed"] for b in bodies) == [explorer_seed(5, r, 0) for r in range(2)]


def test_extra_body_rounds_and_compactor(served: RunningServe, upstream: ScriptedServer) -> None:
    def synthesis_prompt(compactor: str) -> str:
        upstream.reset_log()
        reply = sdk(served).chat.completions.create(
            model="pacore-high",
            messages=[{"role": "user", "content": QUESTION}],
            seed=3,
            extra_body={"rounds": "2", "compactor": compactor},
        )
        rounds = (reply.usage.model_extra or {})["rounds"] if reply.usage else []
        assert [r["width"] for r in rounds] == [2, 1]
        synthesis = next(r.body for r in upstream.requests if r.body.get("n", 1) == 1)
        return str(synthesis["messages"][-1]["content"])

    conclusion, answer = synthesis_prompt("conclusion"), synthesis_prompt("answer")
    # Both keep the conclusion only (no reasoning); the answer compactor cuts it
    # down to the answer itself.
    assert "considering" not in conclusion and "considering" not in answer
    assert "The answer is" in conclusion
    assert "The answer is" not in answer
    assert len(answer) < len(conclusion)


def test_system_and_multi_turn_messages(served: RunningServe, upstream: ScriptedServer) -> None:
    reply = sdk(served).chat.completions.create(
        model="pacore:2",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": QUESTION},
        ],
    )
    assert reply.choices[0].message.content
    first = upstream.requests[0].body["messages"]
    assert [m["role"] for m in first] == ["system", "user", "assistant", "user"]


async def test_async_sdk_concurrent_requests(served: RunningServe) -> None:
    client = openai.AsyncOpenAI(base_url=served.base_url, api_key=KEY, max_retries=0)
    replies = await asyncio.gather(
        *(
            client.chat.completions.create(
                model="pacore:2", messages=[{"role": "user", "content": f"q{i}"}], seed=i
            )
            for i in range(6)
        )
    )
    await client.close()
    assert len({r.id for r in replies}) == 6
    assert all(r.choices[0].message.content for r in replies)


@pytest.fixture
def word_stream_upstream() -> Iterator[ScriptedServer]:
    """An upstream that streams one word per SSE event."""
    with ScriptedServer(stream_words_per_chunk=1).run_in_thread() as srv:
        yield srv


def test_streaming_with_the_sdk(word_stream_upstream: ScriptedServer) -> None:
    upstream = word_stream_upstream
    with running_serve(settings(upstream, api_key=KEY)) as served:
        stream = sdk(served).chat.completions.create(
            model="pacore:3,2",
            messages=[{"role": "user", "content": QUESTION}],
            seed=11,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = list(stream)
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
        for c in chunks
        if c.choices
    )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    expected = asyncio.run(library_result(upstream, [3, 2], seed=11))
    assert content == expected.answer
    assert "Round 1/3: 3 parallel explorers." in reasoning
    assert "Round 2/3: 2 parallel explorers." in reasoning
    assert "Round 3/3: synthesising the answer." in reasoning
    assert reasoning.count("explorer ") >= 3 + 2
    # The final round's tokens were streamed from the upstream as it sent them:
    # one content delta per upstream word, its reasoning as reasoning deltas.
    streamed_calls = [r.body for r in upstream.requests if r.body.get("stream")]
    assert len(streamed_calls) == 1 and streamed_calls[0].get("n", 1) == 1
    content_chunks = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content_chunks) == len(expected.answer.split())
    assert reasoning.endswith(str(expected.reasoning))
    # Progress comes before the answer.
    first_content = next(
        i for i, c in enumerate(chunks) if c.choices and c.choices[0].delta.content
    )
    assert all(
        not (c.choices and (c.choices[0].delta.model_extra or {}).get("reasoning_content"))
        for c in chunks[first_content:]
    )
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop"
    usage = chunks[-1].usage
    assert usage is not None and chunks[-1].choices == []
    assert usage.completion_tokens == expected.effective_ttc
    assert len({c.id for c in chunks}) == 1


def test_streaming_without_usage_has_no_usage_chunk(served: RunningServe) -> None:
    chunks = list(
        sdk(served).chat.completions.create(
            model="pacore:2", messages=[{"role": "user", "content": QUESTION}], stream=True
        )
    )
    assert all(c.usage is None for c in chunks)
    assert all(c.choices for c in chunks)


# --------------------------------------------------------------------------- LangChain


def test_chat_openai_invoke_and_stream(served: RunningServe) -> None:
    chat = ChatOpenAI(
        base_url=served.base_url, api_key=KEY, model="pacore:2", max_retries=0, seed=3
    )
    answer = chat.invoke(QUESTION)
    assert isinstance(answer.content, str) and answer.content.startswith("The answer is")
    streamed = "".join(str(chunk.content) for chunk in chat.stream(QUESTION))
    assert streamed == answer.content


# --------------------------------------------------------------------------- errors


def raw_post(srv: RunningServe, body: Any, key: str | None = KEY) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        f"{srv.base_url}/chat/completions",
        content=content,
        headers={**headers, "Content-Type": "application/json"},
        timeout=30,
    )


def assert_error(resp: httpx.Response, status: int, param: str | None = None) -> str:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["message"] and "Traceback" not in err["message"]
    if param is not None:
        assert err["param"] == param
    return str(err["message"])


def test_auth_required(served: RunningServe) -> None:
    ok = {"model": "pacore:1", "messages": [{"role": "user", "content": "q"}]}
    assert_error(raw_post(served, ok, key=None), 401)
    assert_error(raw_post(served, ok, key="wrong"), 401)
    latin = {"Authorization": "Bearer café".encode("latin-1"), "Content-Type": b"application/json"}
    resp = httpx.post(f"{served.base_url}/chat/completions", json=ok, headers=latin)
    assert_error(resp, 401)
    assert httpx.get(f"{served.base_url}/models").status_code == 401
    with pytest.raises(openai.AuthenticationError):
        sdk(served, key="wrong").models.list()
    assert raw_post(served, ok).status_code == 200


def test_bad_requests_are_400_with_an_openai_error(
    served: RunningServe, upstream: ScriptedServer
) -> None:
    msgs = [{"role": "user", "content": "q"}]
    assert "JSON" in assert_error(raw_post(served, b"{not json"), 400)
    assert_error(raw_post(served, [1, 2]), 400)
    assert_error(raw_post(served, {"messages": msgs}), 400, "model")
    assert_error(raw_post(served, {"model": "pacore-low"}), 400, "messages")
    assert_error(raw_post(served, {"model": "pacore-low", "messages": []}), 400, "messages")
    assert_error(raw_post(served, {"model": "pacore-low", "messages": ["x"]}), 400, "messages")
    blank = [{"role": "user", "content": "  "}]
    assert_error(raw_post(served, {"model": "pacore-low", "messages": blank}), 400, "messages")
    for field, value in [
        ("tools", [{"type": "function", "function": {"name": "f", "parameters": {}}}]),
        ("n", 2),
        ("logprobs", True),
        ("stop", ["\n"]),
        ("response_format", {"type": "json_object"}),
        ("frobnicate", 1),
    ]:
        body = {"model": "pacore-low", "messages": msgs, field: value}
        assert_error(raw_post(served, body), 400, field)
    for field, value in [
        ("temperature", 5),
        ("temperature", "hot"),
        ("max_tokens", 0),
        ("rounds", [0]),
        ("rounds", "a,b"),
        ("compactor", "os:system"),
        ("stream", "yes"),
        ("stream_options", {"include_usage": True}),  # without stream: true
    ]:
        body = {"model": "pacore-low", "messages": msgs, field: value}
        assert_error(raw_post(served, body), 400)
    assert_error(raw_post(served, {"model": "gpt-4", "messages": msgs}), 404, "model")
    per_chunk = {"stream": True, "stream_options": {"continuous_usage_stats": True}}
    assert_error(raw_post(served, {"model": "pacore-low", "messages": msgs, **per_chunk}), 400)
    # Neutral values some clients always send are accepted.
    neutral = {"model": "pacore:1", "messages": msgs, "n": 1, "logprobs": False, "stop": None}
    assert raw_post(served, neutral).status_code == 200
    with pytest.raises(openai.BadRequestError):
        sdk(served).chat.completions.create(model="pacore-low", messages=[], max_tokens=5)
    assert upstream.request_count == 2  # only the neutral request ran (1 + synthesis)


def test_unknown_route_is_an_openai_404(served: RunningServe) -> None:
    resp = httpx.get(f"{served.base_url}/nothing-here")
    assert_error(resp, 404)


def test_upstream_failure_is_a_502_not_a_traceback() -> None:
    with ScriptedServer(fail_when=lambda r: 400).run_in_thread() as bad:
        upstream_host = bad.base_url.split("//")[1].split("/")[0]
        with running_serve(settings(bad)) as srv:
            resp = raw_post(
                srv, {"model": "pacore:2", "messages": [{"role": "user", "content": "q"}]}
            )
    message = assert_error(resp, 502)
    # The round is named; the upstream's URL and body stay in the server's log.
    assert message.startswith("round 0: all 2 explorer calls")
    assert upstream_host not in message and "scripted failure" not in message


# --------------------------------------------------------------------------- limits


async def test_over_max_concurrency_without_a_queue_is_429_with_retry_after() -> None:
    with ScriptedServer(latency=0.5).run_in_thread() as slow:  # noqa: SIM117
        with running_serve(settings(slow, max_concurrency=1, max_queue=0, retry_after_s=3)) as srv:
            body = {"model": "pacore:1", "messages": [{"role": "user", "content": "q"}]}
            async with aiohttp.ClientSession() as session:

                async def post() -> tuple[int, dict[str, str]]:
                    async with session.post(f"{srv.base_url}/chat/completions", json=body) as r:
                        await r.read()
                        return r.status, dict(r.headers)

                first = asyncio.ensure_future(post())
                await asyncio.sleep(0.2)
                status, headers = await post()
                assert (await first)[0] == 200
            assert status == 429
            assert headers["Retry-After"] == "3"
            # The slot is released: the next request runs.
            assert raw_post(srv, body, key=None).status_code == 200


@pytest.mark.parametrize("stream", [False, True])
async def test_disconnect_cancels_the_run(stream: bool) -> None:
    """The client goes during round 1; no round-2 or synthesis call is ever made."""
    with ScriptedServer(latency=0.6).run_in_thread() as slow:  # noqa: SIM117
        with running_serve(settings(slow)) as srv:
            body = {
                "model": "pacore:2,2",
                "messages": [{"role": "user", "content": "q"}],
                "stream": stream,
            }
            async with aiohttp.ClientSession() as session:
                with pytest.raises(TimeoutError):
                    async with session.post(
                        f"{srv.base_url}/chat/completions",
                        json=body,
                        timeout=aiohttp.ClientTimeout(total=0.25),
                    ) as resp:
                        await resp.read()
            await asyncio.sleep(2.0)
            assert slow.request_count == 1  # round 1's n=2 request only
            assert srv.state.runs_cancelled == 1
            assert srv.state.active == 0


async def test_disconnect_while_queued_for_the_upstream_sends_nothing() -> None:
    """A run waiting for room on the upstream is dropped without a call when its client goes."""
    with ScriptedServer(latency=0.8).run_in_thread() as slow:  # noqa: SIM117
        with running_serve(settings(slow, max_samples_in_flight=2)) as srv:
            url = f"{srv.base_url}/chat/completions"

            def body(text: str) -> dict[str, Any]:
                return {"model": "pacore:2", "messages": [{"role": "user", "content": text}]}

            async with aiohttp.ClientSession() as session:

                async def first() -> int:
                    async with session.post(url, json=body("first")) as resp:
                        await resp.read()
                        return resp.status

                holding = asyncio.ensure_future(first())
                await asyncio.sleep(0.2)  # "first" holds both upstream slots
                with pytest.raises(TimeoutError):
                    async with session.post(
                        url, json=body("second"), timeout=aiohttp.ClientTimeout(total=0.3)
                    ) as resp:
                        await resp.read()
                assert await holding == 200
            await asyncio.sleep(0.5)
            prompts = [r.body["messages"][-1]["content"] for r in slow.requests]
            assert "second" not in prompts
            assert srv.state.runs_cancelled == 1


# --------------------------------------------------------------------------- replicas


async def test_one_of_two_upstreams_killed_mid_run_fails_no_request() -> None:
    a = ScriptedServer(latency=0.3)
    b = ScriptedServer(latency=0.3)
    a.start_in_thread()
    b.start_in_thread()
    try:
        with running_serve(settings(a, b)) as srv:
            client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
            calls = asyncio.gather(
                *(
                    client.chat.completions.create(
                        model="pacore:4,2",
                        messages=[{"role": "user", "content": f"problem {i}"}],
                        extra_body={"compactor": "answer"},
                    )
                    for i in range(8)
                )
            )
            await asyncio.sleep(0.15)
            a.stop_thread()  # replica A dies with requests in flight
            replies = await calls
            await client.close()
            stats = srv.state.client.stats()  # type: ignore[attr-defined]
    finally:
        a.stop_thread()
        b.stop_thread()
    assert all(r.choices[0].message.content for r in replies)
    rounds = [(r.usage.model_extra or {})["rounds"] for r in replies if r.usage]
    assert all(sum(x["failures"] for x in rs) == 0 for rs in rounds)
    assert stats[0].failures > 0 and not stats[0].healthy
    assert stats[1].samples > stats[0].samples


# --------------------------------------------------------------------------- the command


def test_pacore_serve_subprocess_drains_on_sigterm() -> None:
    with ScriptedServer(latency=1.0).run_in_thread() as slow:
        with serve_process(
            "--upstream",
            slow.base_url,
            "--model",
            "scripted",
            "--log-level",
            "warning",
            env={"PACORE_SERVE_API_KEY": KEY},
        ) as server:
            base = server.base
            outcome: dict[str, Any] = {}

            def call() -> None:
                outcome["reply"] = openai.OpenAI(
                    base_url=f"{base}/v1", api_key=KEY, max_retries=0
                ).chat.completions.create(
                    model="pacore:2", messages=[{"role": "user", "content": QUESTION}]
                )

            caller = threading.Thread(target=call)
            caller.start()
            time.sleep(0.5)  # the run is in round 1 upstream
            server.proc.send_signal(signal.SIGTERM)
            caller.join(30)
            code = server.proc.wait(30)
        # The run in flight finished (two rounds, ~2 s) before the process exited.
        assert outcome["reply"].choices[0].message.content.startswith("The answer is")
        assert slow.request_count == 2
        assert code in (0, -signal.SIGTERM)
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{base}/health", timeout=1)


def test_pacore_serve_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from pacore_graph.cli import main

    assert main(["serve", "--upstream", "localhost:1", "--model", "m"]) == 2
    assert "http" in capsys.readouterr().err
    assert main(["serve", "--upstream", "http://a/v1", "--model", "m", "--compactor", "x"]) == 2
    assert "compactor" in capsys.readouterr().err
    assert main(["serve", "--upstream", "http://a/v1", "--model", "m", "--temperature", "9"]) == 2
    assert "temperature" in capsys.readouterr().err


def test_pacore_serve_model_needs_upstream_and_the_other_way_round(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pacore_graph.cli import main

    assert main(["serve", "--model", "m"]) == 2
    assert "without --upstream the embedded model is served" in capsys.readouterr().err
    assert main(["serve", "--upstream", "http://a/v1"]) == 2
    assert "--model is required with --upstream" in capsys.readouterr().err
    assert main(["serve", "--max-queue", "-1"]) == 2
    assert "--max-queue" in capsys.readouterr().err
    assert main(["serve", "--queue-timeout", "-1"]) == 2
    assert "--queue-timeout" in capsys.readouterr().err


def test_stats_report_runs_and_replicas() -> None:
    with ScriptedServer().run_in_thread() as a, ScriptedServer().run_in_thread() as b:  # noqa: SIM117
        with running_serve(settings(a, b, api_key=KEY)) as srv:
            sdk(srv).chat.completions.create(
                model="pacore:6", messages=[{"role": "user", "content": QUESTION}]
            )
            assert httpx.get(f"http://127.0.0.1:{srv.server.config.port}/stats").status_code == 401
            stats = httpx.get(
                f"http://127.0.0.1:{srv.server.config.port}/stats",
                headers={"Authorization": f"Bearer {KEY}"},
            ).json()
            urls = [a.base_url, b.base_url]
    assert stats["runs_started"] == 1 and stats["runs_in_progress"] == 0
    assert [r["base_url"] for r in stats["replicas"]] == urls
    assert sum(r["samples"] for r in stats["replicas"]) == 6 + 1
    assert all(r["healthy"] for r in stats["replicas"])


def test_draining_server_refuses_new_runs_with_503(served: RunningServe) -> None:
    root = f"http://127.0.0.1:{served.server.config.port}"
    assert httpx.get(f"{root}/health").status_code == 200
    served.state.draining = True
    assert httpx.get(f"{root}/health").status_code == 503
    body = {"model": "pacore:1", "messages": [{"role": "user", "content": "q"}]}
    assert_error(raw_post(served, body), 503)


def test_streaming_over_replicas_skips_a_dead_one(word_stream_upstream: ScriptedServer) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"
    fields = {"upstreams": (dead, word_stream_upstream.base_url), "model": "scripted"}
    with running_serve(ServeSettings(**fields, retry=FAST)) as srv:
        chunks = list(
            sdk(srv, key="x").chat.completions.create(
                model="pacore:2",
                messages=[{"role": "user", "content": QUESTION}],
                stream=True,
            )
        )
        stats = srv.state.client.stats()  # type: ignore[attr-defined]
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content.startswith("The answer is")
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    streamed = [r for r in word_stream_upstream.requests if r.body.get("stream")]
    assert len(streamed) == 1
    assert not stats[0].healthy and stats[1].samples == 2 + 1


def test_inline_thinking_streams_as_reasoning_like_the_plain_answer() -> None:
    """An upstream without a reasoning parser: <think> text is not streamed as content."""
    with ScriptedServer(reasoning_mode="think", stream_words_per_chunk=1).run_in_thread() as up:  # noqa: SIM117
        with running_serve(settings(up)) as srv:
            ask = {"model": "pacore:2", "messages": [{"role": "user", "content": QUESTION}]}
            plain = sdk(srv, key="x").chat.completions.create(**ask, seed=9)  # type: ignore[call-overload]
            chunks = list(
                sdk(srv, key="x").chat.completions.create(**ask, seed=9, stream=True)  # type: ignore[call-overload]
            )
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or ""
        for c in chunks
        if c.choices
    )
    answer = plain.choices[0].message.content
    assert "<think>" not in answer and answer.strip().startswith("The answer is")
    assert content == answer
    assert "considering" in reasoning and "<think>" not in reasoning
