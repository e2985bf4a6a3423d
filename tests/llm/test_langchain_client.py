"""The LangChain client (``ChatOpenAI`` as ``make_chat_model`` builds it) over real HTTP.

What differs from the direct client: the reasoning field ``ChatOpenAI`` would
drop, retries done by the openai SDK, its transport's errors as
``ModelCallError``, and closing the HTTP client it owns. The behaviour both
clients share is tested once for each in ``test_client.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hostile_support import HUGE, SMALL, ask, errors
from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_openai import ChatOpenAI
from llm_support import PARAMS, closed_port, graded, langchain, one_choice_server, user

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.errors import ModelCallError, NoContentError, UpstreamTransportError
from pacore_graph.llm.langchain_client import (
    LangChainChatClient,
    ReasoningChatOpenAI,
    make_chat_model,
)
from pacore_graph.settings.config import ModelRetryPolicy
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer
from pacore_graph.testing.hostile_upstream import HostileServer


@pytest.mark.parametrize("mode", ["reasoning", "reasoning_content"])
async def test_plain_chat_openai_drops_reasoning_ours_keeps_it(mode: str) -> None:
    async with ScriptedServer(graded, reasoning_mode=mode) as srv:  # type: ignore[arg-type]
        plain = ChatOpenAI(base_url=srv.base_url, model="scripted", api_key="x", max_retries=0)
        ours = make_chat_model(srv.base_url, "scripted", api_key="x")
        assert isinstance(ours, ReasoningChatOpenAI)
        try:
            # The raw LangChain results: upstream has nowhere to put the field.
            raw_plain = await plain.agenerate([[HumanMessage("p")]])
            raw_ours = await ours.agenerate([[HumanMessage("p")]])
            plain_msg = raw_plain.generations[0][0].message
            ours_msg = raw_ours.generations[0][0].message
            assert "why-0" not in repr(plain_msg)
            assert ours_msg.additional_kwargs["reasoning_content"] == "why-0"
            # And through our client adapter.
            (lost,) = await LangChainChatClient(plain).complete(user("p"), params=PARAMS)
            (kept,) = await LangChainChatClient(ours).complete(user("p"), params=PARAMS)
            assert lost.reasoning is None
            assert kept.reasoning == "why-0"
            assert lost.content == kept.content
            assert srv.request_count == 4
        finally:
            await plain.root_async_client.close()
            await ours.root_async_client.close()


async def test_langchain_400_is_not_retried() -> None:
    async with (
        ScriptedServer(graded, fail_when=lambda req: 400) as srv,
        langchain(srv.base_url, retry=ModelRetryPolicy(max_attempts=4)) as client,
    ):
        with pytest.raises(ModelCallError) as info:
            await client.complete(user("bad"), params=PARAMS)
        assert len(srv.requests) == 1
        assert info.value.status == 400


async def test_langchain_retries_a_500() -> None:
    # The openai SDK does the retrying here (its own ~0.5 s backoff).
    async with (
        ScriptedServer(graded, fail_first=1) as srv,
        langchain(srv.base_url, retry=ModelRetryPolicy(max_attempts=2)) as client,
    ):
        (c,) = await client.complete(user("again"), params=PARAMS)
        assert c.content.startswith("again/0")
        assert [r.status for r in srv.requests] == [500, 200]


async def test_langchain_unreachable_server_raises_model_call_error() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    async with langchain(url, retry=ModelRetryPolicy(max_attempts=1)) as client:
        with pytest.raises(ModelCallError, match=r"Connection|Timeout") as info:
            await client.complete(user("anyone?"), params=PARAMS)
    # With the aiohttp transport the SDK reports a refused connection as
    # "OpenAITimeoutError: Request timed out." (httpx-aiohttp's mapping).
    assert isinstance(info.value, UpstreamTransportError)  # a timeout is one too


async def test_langchain_client_tops_up_when_server_ignores_n() -> None:
    async with one_choice_server() as (url, bodies), langchain(url) as client:
        out = await client.complete(user("Q"), n=3, params=PARAMS)
        assert len(out) == 3
        assert all(c.content == "single answer to Q" for c in out)
        assert len(bodies) == 3
        assert bodies[0].get("n") == 3


async def test_langchain_client_aclose_closes_the_http_client() -> None:
    async with ScriptedServer(graded) as srv:
        chat = make_chat_model(srv.base_url, "scripted")
        client = LangChainChatClient(chat)
        await client.complete(user("x"), params=PARAMS)
        assert not chat.root_async_client.is_closed()
        await client.aclose()
        assert chat.root_async_client.is_closed()


@pytest.mark.parametrize(
    ("attack", "kind"),
    [
        ("huge_body", "response_too_large"),
        ("huge_declared", "response_too_large"),
        ("huge_error", "response_too_large"),
        ("index_string", "malformed"),
        ("index_out_of_range", "malformed"),
        ("index_duplicate", "malformed"),
        ("usage_negative", "malformed"),
        ("usage_infinity", "malformed"),
        ("too_many_choices", "malformed"),
        ("message_not_object", "malformed"),
    ],
)
async def test_the_langchain_client_reads_bounded_and_refuses_malformed_answers(
    attack: str, kind: str
) -> None:
    async with HostileServer(size=HUGE) as server:
        chat = make_chat_model(
            server.base_url, "m", sampling=SMALL, retry=ModelRetryPolicy(max_attempts=1)
        )
        client = LangChainChatClient(chat)
        try:
            outcomes = await client.complete_each(ask(attack), n=4, params=SMALL)
        finally:
            await client.aclose()
        completed = server.completed.get(attack, 0)
    failures = errors(outcomes)
    assert {e.kind for e in failures} == {kind}, [str(e) for e in failures]
    assert all("\n" not in str(e) for e in failures)
    assert completed == 0


def numbered(req: ScriptedRequest) -> ScriptedReply:
    """Many words by input (the final prompt carries references), so many deltas."""
    final = "Reference" in req.last_user
    words = " ".join(f"t{k}" for k in range(14))
    return ScriptedReply(
        content=f"{'final' if final else 'draft'} {req.seed}: {words}",
        reasoning=f"weigh {req.seed} {words[:11]}",
    )


async def test_a_langchain_client_streams_the_answer_tokens_in_messages_mode() -> None:
    """``stream_mode="messages"`` gets the final answer token by token, as from the direct client.

    Before ``LangChainChatClient.stream`` the graph saw no streaming client and
    made the final call as one JSON request: no chunk reached the stream.
    """
    async with ScriptedServer(numbered, stream_words_per_chunk=2) as srv:
        chat = make_chat_model(srv.base_url, "scripted", api_key="x")
        client = LangChainChatClient(chat)
        graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]), tracing=False)
        chunks: list[AIMessageChunk] = []
        final: dict[str, Any] = {}
        try:
            async for mode, data in graph.astream(
                {"messages": [{"role": "user", "content": "Q?"}]},
                stream_mode=["messages", "values"],
            ):
                if mode == "messages":
                    message, _meta = data
                    chunks.append(message)
                else:
                    final = data
        finally:
            await client.aclose()
        streamed = [r.body for r in srv.requests if r.body.get("stream")]
    result = final["result"]
    assert len(chunks) > 5  # token by token, not one message at the end
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    joined = "".join(str(c.content) for c in chunks)
    assert joined == result.final.content == final["answer"]
    assert joined.startswith("final ")
    # In order, each delta once: ChatOpenAI's own events do not reach the stream.
    assert joined.split(": ", 1)[1] == " ".join(f"t{k}" for k in range(14))
    assert {c.id for c in chunks} == {final["messages"][-1].id}
    reasoning = "".join(c.additional_kwargs.get("reasoning_content", "") for c in chunks)
    assert reasoning == result.final.reasoning and reasoning.startswith("weigh ")
    # Only the final call streamed, with its usage asked for and recorded.
    assert len(streamed) == 1 and streamed[0]["stream_options"] == {"include_usage": True}
    assert result.final.completion_tokens == len(f"{reasoning} {joined}".split())
    assert not result.final.tokens_estimated


async def test_a_streamed_langchain_call_fails_as_a_model_call_error() -> None:
    async with ScriptedServer(graded, fail_when=lambda req: 400) as srv:
        client = LangChainChatClient(make_chat_model(srv.base_url, "scripted", api_key="x"))
        seen: list[tuple[str, str]] = []

        async def on_delta(kind: str, text: str) -> None:
            seen.append((kind, text))

        try:
            with pytest.raises(ModelCallError) as info:
                await client.stream(user("bad"), params=PARAMS, on_delta=on_delta)
        finally:
            await client.aclose()
    assert info.value.status == 400 and seen == []


async def test_a_streamed_answer_with_no_content_is_a_failure_with_its_cause() -> None:
    def thinks_only(req: ScriptedRequest) -> ScriptedReply:
        return ScriptedReply(content="", reasoning="a long thought " * 4)

    async with ScriptedServer(thinks_only) as srv:
        client = LangChainChatClient(make_chat_model(srv.base_url, "scripted", api_key="x"))
        seen: list[tuple[str, str]] = []

        async def on_delta(kind: str, text: str) -> None:
            seen.append((kind, text))

        try:
            with pytest.raises(NoContentError, match="streamed none"):
                await client.stream(user("q"), params=PARAMS, on_delta=on_delta)
        finally:
            await client.aclose()
    assert seen and {kind for kind, _ in seen} == {"reasoning"}
