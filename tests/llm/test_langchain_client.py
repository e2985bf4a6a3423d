"""The LangChain client (``ChatOpenAI`` as ``make_chat_model`` builds it) over real HTTP.

What differs from the direct client: the reasoning field ``ChatOpenAI`` would
drop, retries done by the openai SDK, its transport's errors as
``ModelCallError``, and closing the HTTP client it owns. The behaviour both
clients share is tested once for each in ``test_client.py``.
"""

from __future__ import annotations

import pytest
from hostile_support import HUGE, SMALL, ask, errors
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from llm_support import PARAMS, closed_port, graded, langchain, one_choice_server, user

from pacore_graph.errors import ModelCallError, UpstreamTransportError
from pacore_graph.llm.langchain_client import (
    LangChainChatClient,
    ReasoningChatOpenAI,
    make_chat_model,
)
from pacore_graph.settings.config import RetryPolicy
from pacore_graph.testing import ScriptedServer
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
        langchain(srv.base_url, retry=RetryPolicy(max_attempts=4)) as client,
    ):
        with pytest.raises(ModelCallError) as info:
            await client.complete(user("bad"), params=PARAMS)
        assert len(srv.requests) == 1
        assert info.value.status == 400


async def test_langchain_retries_a_500() -> None:
    # The openai SDK does the retrying here (its own ~0.5 s backoff).
    async with (
        ScriptedServer(graded, fail_first=1) as srv,
        langchain(srv.base_url, retry=RetryPolicy(max_attempts=2)) as client,
    ):
        (c,) = await client.complete(user("again"), params=PARAMS)
        assert c.content.startswith("again/0")
        assert [r.status for r in srv.requests] == [500, 200]


async def test_langchain_unreachable_server_raises_model_call_error() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    async with langchain(url, retry=RetryPolicy(max_attempts=1)) as client:
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
            server.base_url, "m", sampling=SMALL, retry=RetryPolicy(max_attempts=1)
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
