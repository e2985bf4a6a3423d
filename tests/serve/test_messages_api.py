"""``POST /v1/messages`` with the official ``anthropic`` SDK over real HTTP.

One scripted upstream and one ``pacore serve`` app (uvicorn in a thread) for
the module. Every answer is compared with what the same run gives elsewhere:
the library in-process, or the server's own ``/v1/chat/completions``, so the
two protocols are shown to be one run in two shapes. Error cases check the
SDK's typed exception and Anthropic's error body.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from serve_support import RunningServe, running_serve, serve_settings

from pacore_graph import build_pacore_graph
from pacore_graph.graph.builder import ainvoke_pacore
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.serve.messages_api import chat_request
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing import ScriptedServer
from pacore_graph.testing.script import ScriptedRequest
from pacore_graph.values.records import PaCoReResult

KEY = "sk-messages-test-3"
FAST = ModelRetryPolicy(max_attempts=2, initial_backoff=0.001, max_backoff=0.01)
QUESTION = "What is 17 + 25?"
BROKEN = "This question breaks the upstream."


def _fail_broken(request: ScriptedRequest) -> int | None:
    """The upstream fails (400: not retried) every call whose question is :data:`BROKEN`."""
    return 400 if BROKEN in request.last_user else None


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedServer]:
    with ScriptedServer(fail_when=_fail_broken).run_in_thread() as srv:
        yield srv


@pytest.fixture(scope="module")
def served(upstream: ScriptedServer) -> Iterator[RunningServe]:
    with running_serve(serve_settings(upstream, api_key=KEY, retry=FAST)) as srv:
        yield srv


def client(srv: RunningServe, **kwargs: Any) -> anthropic.Anthropic:
    """The SDK as a user points it at us: the server's root, no retries (errors show at once)."""
    options: dict[str, Any] = {"api_key": KEY, **kwargs}
    return anthropic.Anthropic(base_url=srv.base_url.removesuffix("/v1"), max_retries=0, **options)


def library_result(upstream: ScriptedServer, rounds: list[int], seed: int) -> PaCoReResult:
    """The same run through the library in-process."""

    async def run() -> PaCoReResult:
        pacore_client = OpenAICompatClient(upstream.base_url, "scripted", retry=FAST)
        graph = build_pacore_graph(
            pacore_client, config={"rounds": rounds, "sampling": SamplingParams(seed=seed)}
        )
        try:
            return await ainvoke_pacore(graph, QUESTION)
        finally:
            await pacore_client.aclose()

    return asyncio.run(run())


USER = [{"role": "user", "content": QUESTION}]


# --------------------------------------------------------------------------- answers


def test_a_message_is_the_library_run(served: RunningServe, upstream: ScriptedServer) -> None:
    reply = client(served).messages.create(
        model="pacore:3,2", max_tokens=256, messages=USER, extra_body={"seed": 11}
    )
    expected = library_result(upstream, [3, 2], seed=11)
    assert reply.type == "message" and reply.role == "assistant"
    assert reply.id.startswith("msg_")
    assert reply.model == "pacore:3,2"
    thinking, text = reply.content
    assert thinking.type == "thinking" and thinking.thinking == expected.reasoning
    assert text.type == "text" and text.text == expected.answer
    assert reply.stop_reason == "end_turn" and reply.stop_sequence is None
    assert reply.usage.output_tokens == expected.effective_ttc
    assert reply.usage.input_tokens == sum(t.prompt_tokens for t in expected.trajectories)
    rounds = (reply.usage.model_extra or {})["rounds"]
    assert [r["width"] for r in rounds] == [3, 2, 1]


def test_max_tokens_reaches_every_call_and_a_cut_answer_says_max_tokens(
    served: RunningServe, upstream: ScriptedServer
) -> None:
    upstream.reset_log()
    # This SDK has no temperature argument any more; clients send it as an extra field.
    reply = client(served).messages.create(
        model="pacore:2", max_tokens=8, messages=USER, extra_body={"temperature": 0.4}
    )
    bodies = [r.body for r in upstream.requests]
    assert bodies and all(b["max_tokens"] == 8 and b["temperature"] == 0.4 for b in bodies)
    # A scripted reply is 6 words of reasoning and 4 of answer: cut within the answer.
    assert reply.stop_reason == "max_tokens"


def test_another_method_answers_as_on_chat_completions(served: RunningServe) -> None:
    """rsa:N,K,T through both protocols: the same answer and usage (one run, two shapes)."""
    message = client(served).messages.create(
        model="rsa:4,2,2", max_tokens=64, messages=USER, extra_body={"seed": 5}
    )
    chat = openai.OpenAI(base_url=served.base_url, api_key=KEY, max_retries=0)
    completion = chat.chat.completions.create(
        model="rsa:4,2,2", messages=USER, seed=5, max_tokens=64
    )
    assert completion.usage is not None
    assert message.content[-1].type == "text"
    assert message.content[-1].text == completion.choices[0].message.content
    assert message.usage.output_tokens == completion.usage.completion_tokens
    assert message.usage.input_tokens == completion.usage.prompt_tokens


def test_system_prompt_and_content_blocks_reach_the_explorers(
    served: RunningServe, upstream: ScriptedServer
) -> None:
    upstream.reset_log()
    client(served).messages.create(
        model="pacore:1",
        max_tokens=32,
        system=[{"type": "text", "text": "You are terse."}],
        messages=[
            {"role": "user", "content": "Hello."},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "greet back", "signature": "s"},
                    {"type": "text", "text": "Hi."},
                ],
            },
            {"role": "user", "content": [{"type": "text", "text": QUESTION}]},
        ],
    )
    first = upstream.requests[0].body["messages"]
    assert first == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hello."},
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": QUESTION},
    ]


def test_disabled_thinking_leaves_it_out(served: RunningServe) -> None:
    sdk = client(served)
    reply = sdk.messages.create(
        model="pacore:2", max_tokens=64, messages=USER, thinking={"type": "disabled"}
    )
    assert [b.type for b in reply.content] == ["text"]
    with sdk.messages.stream(
        model="pacore:2", max_tokens=64, messages=USER, thinking={"type": "disabled"}
    ) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["text"]


# --------------------------------------------------------------------------- streaming


def test_a_stream_has_anthropics_events_and_ends_with_the_plain_answer(
    served: RunningServe,
) -> None:
    sdk = client(served)
    plain = sdk.messages.create(
        model="pacore:3,2", max_tokens=256, messages=USER, extra_body={"seed": 4}
    )
    events: list[Any] = []
    with sdk.messages.stream(
        model="pacore:3,2", max_tokens=256, messages=USER, extra_body={"seed": 4}
    ) as stream:
        for event in stream:
            events.append(event)
        final = stream.get_final_message()
    kinds = [e.type for e in events if e.type not in ("text", "thinking")]  # SDK helper events
    assert kinds[0] == "message_start"
    assert kinds[-2:] == ["message_delta", "message_stop"]
    starts = [e.content_block.type for e in events if e.type == "content_block_start"]
    assert starts == ["thinking", "text"]
    deltas = [e.delta.type for e in events if e.type == "content_block_delta"]
    assert deltas[0] == "thinking_delta" and deltas[-1] == "text_delta"
    # Every thinking delta comes before the first text delta.
    assert deltas.index("text_delta") == len(deltas) - deltas[::-1].index("thinking_delta")
    assert kinds.count("content_block_stop") == 2
    # Round progress is the thinking; the answer and usage are the plain call's.
    thinking, text = final.content
    assert thinking.type == "thinking" and "Round 1/3: 3 parallel explorers." in thinking.thinking
    assert "Round 3/3: synthesising the answer." in thinking.thinking
    assert text.type == "text" and text.text == plain.content[-1].text
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == plain.usage.output_tokens
    assert final.usage.input_tokens == plain.usage.input_tokens


def test_async_client_streams_too(served: RunningServe) -> None:
    async def run() -> tuple[str, str]:
        sdk = anthropic.AsyncAnthropic(
            base_url=served.base_url.removesuffix("/v1"), api_key=KEY, max_retries=0
        )
        async with sdk.messages.stream(
            model="majority:3", max_tokens=64, messages=USER, extra_body={"seed": 2}
        ) as stream:
            text = "".join([t async for t in stream.text_stream])
            final = await stream.get_final_message()
        await sdk.close()
        return text, final.content[-1].text  # type: ignore[union-attr]

    text, final_text = asyncio.run(run())
    assert text and text == final_text


def test_a_failed_run_streams_an_error_event(served: RunningServe) -> None:
    with (
        pytest.raises(anthropic.APIStatusError) as caught,
        client(served).messages.stream(
            model="pacore:2", max_tokens=32, messages=[{"role": "user", "content": BROKEN}]
        ) as stream,
    ):
        stream.get_final_message()
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "api_error"
    assert "127.0.0.1" not in body["error"]["message"]  # upstreams are never named by URL


# --------------------------------------------------------------------------- errors


def _error(exc: anthropic.APIStatusError) -> tuple[int, str, str]:
    body = exc.body
    assert isinstance(body, dict) and body["type"] == "error", body
    return exc.status_code, body["error"]["type"], body["error"]["message"]


@pytest.mark.parametrize(
    ("fields", "status", "kind", "names"),
    [
        ({"model": "gpt-9", "max_tokens": 8, "messages": USER}, 404, "not_found_error", "gpt-9"),
        (
            {"model": "pacore-low", "max_tokens": 8, "messages": USER, "stop_sequences": ["x"]},
            400,
            "invalid_request_error",
            "stop_sequences",
        ),
        (
            {
                "model": "pacore-low",
                "max_tokens": 8,
                "messages": USER,
                "tools": [{"name": "t", "input_schema": {"type": "object"}}],
            },
            400,
            "invalid_request_error",
            "tools",
        ),
        (
            {"model": "pacore-low", "max_tokens": 8, "messages": USER, "rounds": [0]},
            400,
            "invalid_request_error",
            "rounds",
        ),
        (
            {
                "model": "pacore-low",
                "max_tokens": 8,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "image", "source": {"type": "url", "url": "http://x/i.png"}}
                        ],
                    }
                ],
            },
            400,
            "invalid_request_error",
            "'image'",
        ),
        (
            {
                "model": "pacore-low",
                "max_tokens": 8,
                "messages": [*USER, {"role": "assistant", "content": "The answer is"}],
            },
            400,
            "invalid_request_error",
            "prefill",
        ),
        (
            {"model": "pacore-low", "max_tokens": 8, "messages": USER, "mystery": 1},
            400,
            "invalid_request_error",
            "mystery",
        ),
    ],
)
def test_bad_requests_get_anthropic_errors(
    served: RunningServe, fields: dict[str, Any], status: int, kind: str, names: str
) -> None:
    model, messages, max_tokens = (
        fields.pop("model"),
        fields.pop("messages"),
        fields.pop("max_tokens"),
    )
    with pytest.raises(anthropic.APIStatusError) as caught:
        client(served).messages.create(
            model=model, messages=messages, max_tokens=max_tokens, extra_body=fields
        )
    got_status, got_kind, message = _error(caught.value)
    assert (got_status, got_kind) == (status, kind)
    assert names in message


def test_max_tokens_is_required_as_in_anthropics_api(served: RunningServe) -> None:
    """The SDK checks it before sending, so this one goes as raw HTTP."""
    raw = httpx.post(
        f"{served.base_url}/messages",
        headers={"x-api-key": KEY},
        json={"model": "pacore-low", "messages": USER},
        timeout=30,
    )
    assert raw.status_code == 400
    assert raw.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"},
    }


def test_keys_by_x_api_key_or_bearer(served: RunningServe) -> None:
    with pytest.raises(anthropic.AuthenticationError) as caught:
        client(served, api_key="sk-wrong").messages.create(
            model="pacore:1", max_tokens=8, messages=USER
        )
    assert _error(caught.value)[:2] == (401, "authentication_error")
    # The SDK sends api_key as x-api-key and auth_token as Authorization: Bearer.
    by_bearer = anthropic.Anthropic(
        base_url=served.base_url.removesuffix("/v1"), auth_token=KEY, max_retries=0
    )
    assert by_bearer.messages.create(model="pacore:1", max_tokens=8, messages=USER).content
    # The chat endpoint takes the same x-api-key.
    answered = httpx.post(
        f"{served.base_url}/chat/completions",
        headers={"x-api-key": KEY},
        json={"model": "pacore:1", "messages": USER},
        timeout=30,
    )
    assert answered.status_code == 200


def test_an_overloaded_server_answers_529(served: RunningServe) -> None:
    served.state.draining = True
    try:
        with pytest.raises(anthropic.APIStatusError) as caught:
            client(served).messages.create(model="pacore:1", max_tokens=8, messages=USER)
    finally:
        served.state.draining = False
    assert _error(caught.value)[:2] == (529, "overloaded_error")
    assert isinstance(caught.value, anthropic.OverloadedError)


def test_the_body_guard_answers_in_anthropics_shape(served: RunningServe) -> None:
    raw = httpx.post(
        f"{served.base_url}/messages",
        headers={"x-api-key": KEY, "content-type": "application/json"},
        content=b"{not json",
        timeout=30,
    )
    assert raw.status_code == 400
    assert raw.json()["type"] == "error"
    assert raw.json()["error"]["type"] == "invalid_request_error"
    big = json.dumps(
        {"model": "pacore:1", "max_tokens": 8, "messages": USER, "pad": "x" * 5 * 2**20}
    )
    refused = httpx.post(
        f"{served.base_url}/messages",
        headers={"x-api-key": KEY, "content-type": "application/json"},
        content=big.encode(),
        timeout=30,
    )
    assert refused.status_code == 413
    assert refused.json()["error"]["type"] == "request_too_large"
    # The chat endpoint keeps OpenAI's shape.
    chat = httpx.post(
        f"{served.base_url}/chat/completions",
        headers={"x-api-key": KEY, "content-type": "application/json"},
        content=b"{not json",
        timeout=30,
    )
    assert chat.status_code == 400 and "message" in chat.json()["error"]


def test_runs_share_the_servers_counters(served: RunningServe) -> None:
    before = served.state.runs_started
    client(served).messages.create(model="pacore:1", max_tokens=8, messages=USER)
    assert served.state.runs_started == before + 1
    metrics = httpx.get(
        f"{served.base_url.removesuffix('/v1')}/metrics", headers={"x-api-key": KEY}, timeout=10
    )
    assert 'outcome="ok"' in metrics.text


# --------------------------------------------------------------------------- translation


def test_the_translation_keeps_settings_and_refuses_neutral_values_only_when_set() -> None:
    chat, shown = chat_request(
        {
            "model": "pacore-low",
            "max_tokens": 9,
            "messages": USER,
            "system": "Be brief.",
            "temperature": 0.2,
            "rounds": "4,2",
            "compactor": "answer",
            "seed": 3,
            "top_k": None,
            "stop_sequences": [],
            "tool_choice": {"type": "auto"},
            "metadata": {"user_id": "u1"},
            "thinking": {"type": "enabled", "budget_tokens": 1024},
        }
    )
    assert shown is True
    assert chat == {
        "model": "pacore-low",
        "max_tokens": 9,
        "temperature": 0.2,
        "rounds": "4,2",
        "compactor": "answer",
        "seed": 3,
        "messages": [{"role": "system", "content": "Be brief."}, *USER],
    }
