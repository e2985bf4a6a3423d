"""Tests of the scripted OpenAI-compatible server, over real HTTP only.

The server is the ground truth for every other test and benchmark, so these
tests check it through the same clients the library uses (aiohttp and the
``openai`` SDK).  Async tests are wrapped in ``asyncio.run`` so they need no
pytest plugin configuration.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

from pacore_graph.testing import (
    DISCONNECT_STATUS,
    ScriptedReply,
    ScriptedRequest,
    ScriptedServer,
    ScriptedToolCall,
    count_tokens,
    default_respond,
)

REPO_ROOT = Path(__file__).resolve().parents[2]


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coro)


def user(text: str) -> list[ChatCompletionMessageParam]:
    return [{"role": "user", "content": text}]


def client(srv: ScriptedServer) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=srv.base_url, api_key="x", max_retries=0)


async def post_chat(
    session: aiohttp.ClientSession, srv: ScriptedServer, **body: Any
) -> tuple[int, dict[str, Any]]:
    body.setdefault("model", "scripted")
    async with session.post(f"{srv.base_url}/chat/completions", json=body) as resp:
        return resp.status, await resp.json()


def echo_index(req: ScriptedRequest) -> str:
    return f"sample {req.sample_index} of {req.last_user}"


# ---------------------------------------------------------------------- choices and determinism


def test_n_choices_get_distinct_sample_indices() -> None:
    async def main() -> None:
        async with ScriptedServer(echo_index) as srv:
            resp = await client(srv).chat.completions.create(
                model="scripted", messages=user("q"), n=4
            )
        assert [c.index for c in resp.choices] == [0, 1, 2, 3]
        assert [c.message.content for c in resp.choices] == [f"sample {i} of q" for i in range(4)]
        assert all(c.finish_reason == "stop" for c in resp.choices)

    run(main())


def test_default_responder_differs_by_sample_and_seed() -> None:
    async def main() -> None:
        async with ScriptedServer() as srv:
            c = client(srv)
            many = await c.chat.completions.create(model="scripted", messages=user("q"), n=4)
            seeded = [
                await c.chat.completions.create(model="scripted", messages=user("q"), seed=s)
                for s in (1, 2, 1)
            ]
        assert len({ch.message.content for ch in many.choices}) == 4
        texts = [r.choices[0].message.content for r in seeded]
        assert texts[0] == texts[2] != texts[1]

    run(main())


def test_answers_depend_on_input_not_on_call_order() -> None:
    prompts = [f"problem {i}" for i in range(12)]

    async def answers(order: list[str]) -> dict[str, str]:
        # Jitter makes completion order differ from send order as well.
        # The SDK on its aiohttp transport, every call bounded: under heavy load
        # its default transport once left a response unread in the socket (the
        # loop idle, 499 bytes queued) until its 600 s timeout. This test is
        # about the server's answers, so a lost read must fail in seconds.
        async with (
            ScriptedServer(latency=0.001, latency_jitter=0.02) as srv,
            openai.AsyncOpenAI(
                base_url=srv.base_url,
                api_key="x",
                max_retries=0,
                timeout=30.0,
                http_client=openai.DefaultAioHttpClient(),
            ) as c,
        ):
            resps = await asyncio.gather(
                *(c.chat.completions.create(model="scripted", messages=user(p)) for p in order)
            )
        return {p: str(r.choices[0].message.content) for p, r in zip(order, resps, strict=True)}

    async def main() -> None:
        forward = await answers(prompts)
        backward = await answers(prompts[::-1])
        assert forward == backward
        assert len(set(forward.values())) == len(prompts)

    run(main())


# ---------------------------------------------------------------------- reasoning modes


@pytest.mark.parametrize(
    ("mode", "expect_field"),
    [
        ("none", None),
        ("reasoning", "reasoning"),
        ("reasoning_content", "reasoning_content"),
        ("think", None),
    ],
)
def test_reasoning_modes_field_names(mode: Any, expect_field: str | None) -> None:
    req = ScriptedRequest(
        messages=[{"role": "user", "content": "m"}],
        last_user="m",
        sample_index=0,
        model="scripted",
        params={},
    )
    expected = default_respond(req)
    assert expected.reasoning is not None

    async def main() -> None:
        async with ScriptedServer(reasoning_mode=mode) as srv, aiohttp.ClientSession() as s:
            status, body = await post_chat(s, srv, messages=user("m"))
        assert status == 200
        message = body["choices"][0]["message"]
        reasoning_keys = {"reasoning", "reasoning_content"} & message.keys()
        assert reasoning_keys == ({expect_field} if expect_field else set())
        if expect_field:
            assert message[expect_field] == expected.reasoning
            assert message["content"] == expected.content
        elif mode == "think":
            assert message["content"].startswith(f"<think>{expected.reasoning}</think>")
            assert message["content"].endswith(expected.content)
        else:
            assert message["content"] == expected.content

    run(main())


@pytest.mark.parametrize("mode", ["none", "reasoning", "reasoning_content", "think"])
def test_inline_think_tags_are_parsed_only_by_reasoning_parsers(mode: Any) -> None:
    raw = "<think>hmm let me see</think>Final: 42"

    async def main() -> None:
        async with (
            ScriptedServer(lambda r: raw, reasoning_mode=mode) as srv,
            aiohttp.ClientSession() as s,
        ):
            _, body = await post_chat(s, srv, messages=user("x"))
        message = body["choices"][0]["message"]
        if mode in ("reasoning", "reasoning_content"):
            assert message[mode] == "hmm let me see"
            assert message["content"] == "Final: 42"
        else:
            assert message["content"] == raw
            assert "reasoning" not in message and "reasoning_content" not in message

    run(main())


def test_reply_without_reasoning_has_no_reasoning_field() -> None:
    async def main() -> None:
        async with (
            ScriptedServer(lambda r: "plain", reasoning_mode="reasoning") as srv,
            aiohttp.ClientSession() as s,
        ):
            _, body = await post_chat(s, srv, messages=user("x"))
        assert body["choices"][0]["message"] == {"role": "assistant", "content": "plain"}

    run(main())


# ---------------------------------------------------------------------- truncation and usage


def test_max_tokens_truncates_content_and_sets_length() -> None:
    ten = "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9"

    async def main() -> None:
        async with ScriptedServer(lambda r: ten) as srv:
            c = client(srv)
            cut = await c.chat.completions.create(
                model="scripted", messages=user("x"), max_tokens=4
            )
            newer = await c.chat.completions.create(
                model="scripted",
                messages=user("x"),
                max_completion_tokens=7,
            )
            fits = await c.chat.completions.create(
                model="scripted", messages=user("x"), max_tokens=10
            )
        assert cut.choices[0].finish_reason == "length"
        assert cut.choices[0].message.content == "w0 w1 w2 w3"
        assert cut.usage is not None and cut.usage.completion_tokens == 4
        assert newer.choices[0].finish_reason == "length"
        assert count_tokens(newer.choices[0].message.content) == 7
        assert fits.choices[0].finish_reason == "stop"
        assert fits.choices[0].message.content == ten

    run(main())


def test_truncation_inside_reasoning_leaves_no_content() -> None:
    reply = ScriptedReply(content="the end", reasoning="a b c d e")

    async def main() -> None:
        async with ScriptedServer(lambda r: reply) as srv, aiohttp.ClientSession() as s:
            _, body = await post_chat(s, srv, messages=user("x"), max_tokens=3)
            _, body2 = await post_chat(s, srv, messages=user("x"), max_tokens=6)
        choice = body["choices"][0]
        assert choice["finish_reason"] == "length"
        assert choice["message"]["reasoning"] == "a b c"
        assert choice["message"]["content"] is None
        assert body["usage"]["completion_tokens"] == 3
        assert body2["choices"][0]["message"]["content"] == "the"

    run(main())


def test_explicit_completion_tokens_force_truncation() -> None:
    reply = ScriptedReply(content="short answer", completion_tokens=500)

    async def main() -> None:
        async with ScriptedServer(lambda r: reply) as srv, aiohttp.ClientSession() as s:
            _, cut = await post_chat(s, srv, messages=user("x"), max_tokens=100)
            _, free = await post_chat(s, srv, messages=user("x"))
        assert cut["choices"][0]["finish_reason"] == "length"
        assert cut["usage"]["completion_tokens"] == 100
        assert free["usage"]["completion_tokens"] == 500

    run(main())


def test_usage_sums_over_choices_and_messages() -> None:
    def respond(req: ScriptedRequest) -> ScriptedReply:
        return ScriptedReply(content="x " * (req.sample_index + 1), reasoning="r r")

    messages = [
        {"role": "system", "content": "be brief please"},
        {"role": "user", "content": [{"type": "text", "text": "two words"}]},
    ]

    async def main() -> None:
        async with ScriptedServer(respond) as srv, aiohttp.ClientSession() as s:
            _, body = await post_chat(s, srv, messages=messages, n=3)
        # completions: (1+2) + (2+2) + (3+2) words
        assert body["usage"] == {"prompt_tokens": 5, "completion_tokens": 12, "total_tokens": 17}
        assert body["object"] == "chat.completion"
        assert body["id"].startswith("chatcmpl-")

    run(main())


# ---------------------------------------------------------------------- streaming


def test_streaming_sse_matches_non_streaming() -> None:
    async def main() -> None:
        async with ScriptedServer(stream_words_per_chunk=2) as srv, aiohttp.ClientSession() as s:
            _, full = await post_chat(s, srv, messages=user("stream me"), n=2)
            body = {
                "model": "scripted",
                "messages": user("stream me"),
                "n": 2,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            async with s.post(f"{srv.base_url}/chat/completions", json=body) as resp:
                assert resp.headers["Content-Type"].startswith("text/event-stream")
                raw = await resp.text()
        events = [line[len("data: ") :] for line in raw.splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        chunks = [json.loads(e) for e in events[:-1]]
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        assert len({c["id"] for c in chunks}) == 1
        content = {0: "", 1: ""}
        reasoning = {0: "", 1: ""}
        finishes: dict[int, str] = {}
        for c in chunks[:-1]:
            (choice,) = c["choices"]
            delta = choice["delta"]
            content[choice["index"]] += delta.get("content") or ""
            reasoning[choice["index"]] += delta.get("reasoning") or ""
            if choice["finish_reason"]:
                finishes[choice["index"]] = choice["finish_reason"]
        assert finishes == {0: "stop", 1: "stop"}
        for i in (0, 1):
            assert content[i] == full["choices"][i]["message"]["content"]
            assert reasoning[i] == full["choices"][i]["message"]["reasoning"]
        assert chunks[-1]["choices"] == []
        assert chunks[-1]["usage"] == full["usage"]

    run(main())


def test_streaming_with_openai_sdk_and_no_usage_chunk() -> None:
    async def main() -> None:
        async with ScriptedServer(
            lambda r: "one two three four five six seven", stream_words_per_chunk=3
        ) as srv:
            stream = await client(srv).chat.completions.create(
                model="scripted", messages=user("x"), stream=True
            )
            pieces = [ch async for ch in stream]
        text = "".join(ch.choices[0].delta.content or "" for ch in pieces if ch.choices)
        assert text == "one two three four five six seven"
        assert all(ch.usage is None for ch in pieces)
        assert pieces[-1].choices[0].finish_reason == "stop"

    run(main())


# ---------------------------------------------------------------------- failures


def test_fail_first_then_success_per_distinct_prompt() -> None:
    async def main() -> None:
        async with ScriptedServer(fail_first=2, failure_status=503) as srv:
            c = client(srv)
            for _ in range(2):
                with pytest.raises(openai.InternalServerError) as info:
                    await c.chat.completions.create(model="scripted", messages=user("a"))
                assert info.value.status_code == 503
            ok = await c.chat.completions.create(model="scripted", messages=user("a"))
            assert ok.choices[0].message.content
            with pytest.raises(openai.InternalServerError):  # a new prompt has its own count
                await c.chat.completions.create(model="scripted", messages=user("b"))
            assert [r.status for r in srv.requests] == [503, 503, 200, 503]
            srv.reset_log()
            srv.reset_attempts()
            assert srv.requests == [] and srv.request_count == 0
            with pytest.raises(openai.InternalServerError):
                await c.chat.completions.create(model="scripted", messages=user("a"))

    run(main())


def test_sdk_retries_recover_from_fail_first() -> None:
    async def main() -> None:
        async with ScriptedServer(fail_first=1) as srv:
            c = openai.AsyncOpenAI(base_url=srv.base_url, api_key="x", max_retries=2)
            c = c.with_options(timeout=5.0)
            # The SDK backs off ~0.5 s before a retry; that is the cost of this test.
            resp = await c.chat.completions.create(model="scripted", messages=user("r"))
            assert resp.choices[0].message.content
            assert [r.status for r in srv.requests] == [500, 200]

    run(main())


def test_failure_rate_is_deterministic_and_retries_can_succeed() -> None:
    prompts = [f"p{i}" for i in range(40)]

    async def statuses() -> list[int]:
        async with ScriptedServer(failure_rate=0.5) as srv, aiohttp.ClientSession() as s:
            # Concurrent and reversed: the outcome must not depend on order.
            await asyncio.gather(*(post_chat(s, srv, messages=user(p)) for p in prompts[::-1]))
            by_prompt = {r.body["messages"][0]["content"]: r.status for r in srv.requests}
            # Retrying each failed prompt eventually succeeds (the attempt number changes).
            for p, status in by_prompt.items():
                tries = 0
                while status != 200:
                    status, _ = await post_chat(s, srv, messages=user(p))
                    tries += 1
                    assert tries < 30
        return [by_prompt[p] for p in prompts]

    async def main() -> None:
        first, second = await statuses(), await statuses()
        assert first == second
        assert 5 < first.count(500) < 35
        assert set(first) == {200, 500}

    run(main())


def test_fail_when_returns_429() -> None:
    def limited(req: ScriptedRequest) -> int | None:
        return 429 if "busy" in req.last_user else None

    async def main() -> None:
        async with ScriptedServer(fail_when=limited) as srv:
            c = client(srv)
            with pytest.raises(openai.RateLimitError) as info:
                await c.chat.completions.create(model="scripted", messages=user("busy now"))
            assert info.value.status_code == 429
            body = info.value.body
            assert isinstance(body, dict) and body["type"] == "rate_limit_error"
            ok = await c.chat.completions.create(model="scripted", messages=user("free"))
            assert ok.choices[0].message.content

    run(main())


def test_disconnect_mode_raises_connection_error() -> None:
    async def main() -> None:
        async with ScriptedServer(fail_first=1, failure_mode="disconnect") as srv:
            c = client(srv)
            with pytest.raises(openai.APIConnectionError):
                await c.chat.completions.create(model="scripted", messages=user("d"))
            async with aiohttp.ClientSession() as s:
                with pytest.raises(aiohttp.ServerDisconnectedError):
                    await post_chat(s, srv, messages=user("e"))
                status, _ = await post_chat(s, srv, messages=user("e"))  # second attempt
            assert status == 200
            assert [r.status for r in srv.requests] == [DISCONNECT_STATUS, DISCONNECT_STATUS, 200]

    run(main())


def test_bad_requests_and_broken_responder() -> None:
    def broken(req: ScriptedRequest) -> str:
        raise RuntimeError("script bug")

    async def main() -> None:
        async with ScriptedServer(broken) as srv, aiohttp.ClientSession() as s:
            status, body = await post_chat(s, srv, messages=[])
            assert status == 400 and "messages" in body["error"]["message"]
            status, body = await post_chat(s, srv, messages=user("x"))
            assert status == 500 and "script bug" in body["error"]["message"]

    run(main())


# ---------------------------------------------------------------------- responders


def test_async_responder_tool_calls_and_request_fields() -> None:
    seen: list[ScriptedRequest] = []

    async def respond(req: ScriptedRequest) -> ScriptedReply:
        seen.append(req)
        await asyncio.sleep(0)
        return ScriptedReply(
            content="", tool_calls=(ScriptedToolCall("run_python", {"code": "print(1)"}),)
        )

    async def main() -> None:
        async with ScriptedServer(respond) as srv:
            resp = await client(srv).chat.completions.create(
                model="other-model",
                messages=[{"role": "system", "content": "s"}, *user("go")],
                temperature=0.7,
                seed=3,
                extra_headers={"X-Trace": "abc"},
            )
        choice = resp.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.tool_calls is not None
        call = choice.message.tool_calls[0]
        assert call.function.name == "run_python"  # type: ignore[union-attr]
        assert json.loads(call.function.arguments) == {"code": "print(1)"}  # type: ignore[union-attr]
        assert resp.model == "other-model"
        (req,) = seen
        assert req.last_user == "go" and req.model == "other-model"
        assert req.params["temperature"] == 0.7 and req.seed == 3
        assert req.headers.get("x-trace") == "abc"

    run(main())


def test_models_and_health_endpoints() -> None:
    async def main() -> None:
        async with ScriptedServer(model="my-model") as srv, aiohttp.ClientSession() as s:
            async with s.get(f"{srv.base_url}/models") as resp:
                assert resp.status == 200
                assert (await resp.json())["data"][0]["id"] == "my-model"
            health = srv.base_url.removesuffix("/v1") + "/health"
            async with s.get(health) as resp:
                assert resp.status == 200

    run(main())


def test_log_requests_false_keeps_only_count() -> None:
    async def main() -> None:
        async with ScriptedServer(log_requests=False) as srv, aiohttp.ClientSession() as s:
            for i in range(3):
                await post_chat(s, srv, messages=user(str(i)))
            assert srv.requests == [] and srv.request_count == 3

    run(main())


# ---------------------------------------------------------------------- thread and process modes


def test_thread_mode_serves_sync_clients_and_stops() -> None:
    with ScriptedServer(echo_index).run_in_thread() as srv:
        sync = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
        resp = sync.chat.completions.create(model="scripted", messages=user("t"), n=2)
        assert [c.message.content for c in resp.choices] == ["sample 0 of t", "sample 1 of t"]
        assert len(srv.requests) == 1
        url = srv.base_url
    with pytest.raises(openai.APIConnectionError):
        openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=2.0).models.list()


def test_thread_mode_reports_bind_errors() -> None:
    with ScriptedServer().run_in_thread() as first, pytest.raises(OSError):
        ScriptedServer(port=first.port).start_in_thread()


SERVER_SCRIPT = REPO_ROOT / "pacore_graph" / "testing" / "scripted_server.py"


@pytest.mark.parametrize(
    "launch",
    [
        ["-m", "pacore_graph.testing.scripted_server"],
        # As a plain script it imports nothing from pacore_graph: fast start-up
        # for benchmarks, and no dependency on the rest of the library.
        [str(SERVER_SCRIPT)],
    ],
    ids=["module", "script"],
)
def test_subprocess_mode_prints_ready_and_serves(launch: list[str]) -> None:
    async def main() -> None:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(
                [str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
            ),
        }
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *launch,
            "--port",
            "0",
            "--reasoning-mode",
            "reasoning_content",
            "--model",
            "proc-model",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        try:
            assert proc.stdout is not None
            line = (await asyncio.wait_for(proc.stdout.readline(), timeout=15)).decode().strip()
            assert line.startswith("READY http://127.0.0.1:") and line.endswith("/v1")
            base_url = line.split(" ", 1)[1]
            c = openai.AsyncOpenAI(base_url=base_url, api_key="x", max_retries=0)
            resp = await c.chat.completions.create(model="proc-model", messages=user("hi"))
            extra = resp.choices[0].message.model_extra or {}
            assert extra.get("reasoning_content", "").startswith("considering")
            assert str(resp.choices[0].message.content).startswith("The answer is ")
        finally:
            proc.terminate()
            _, stderr = await asyncio.wait_for(proc.communicate(), timeout=10)
        assert proc.returncode == 0
        assert b"Warning" not in stderr and b"Traceback" not in stderr, stderr.decode()

    run(main())


def test_spawn_server_waits_for_ready_and_reports_a_child_that_never_is() -> None:
    """``spawn_server`` returns a serving process's URL, and kills a child that prints else."""
    import urllib.request

    from pacore_graph.testing.loopback_server import spawn_server

    argv = [sys.executable, "-m", "pacore_graph.testing.scripted_server", "--model", "spawned"]
    proc, base_url = spawn_server(argv)
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=10) as response:
            listed = json.loads(response.read())
        assert [m["id"] for m in listed["data"]] == ["spawned"]
    finally:
        proc.terminate()
        proc.wait(10)

    with pytest.raises(RuntimeError, match="did not start: 'not ready'"):
        spawn_server([sys.executable, "-c", "print('not ready'); import time; time.sleep(60)"])
    # The refused child was killed, not left sleeping.
    alive = [
        cmdline
        for cmdline in (_read_cmdline(path) for path in Path("/proc").glob("[0-9]*/cmdline"))
        if b"print('not ready')" in cmdline
    ]
    assert alive == []


def _read_cmdline(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # the process ended meanwhile
        return b""
