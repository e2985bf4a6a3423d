"""What the client tests share: the two clients opened against a URL, a scripted responder.

Replies depend only on the request (last user message, sample index), never
on call order; ``BOTH`` runs a test once per client.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web

from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.llm.langchain_client import LangChainChatClient, make_chat_model
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing import ScriptedReply, ScriptedRequest

FAST_RETRY = ModelRetryPolicy(max_attempts=4, initial_backoff=0.001, max_backoff=0.01)


PARAMS = SamplingParams()


SECRET = "sk-test-SECRET-4242"


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def graded(req: ScriptedRequest) -> ScriptedReply:
    """Sample i answers with 2 + 3*i words of content and a one-word reasoning."""
    words = " ".join(f"w{j}" for j in range(2 + 3 * req.sample_index))
    return ScriptedReply(
        content=f"{req.last_user}/{req.sample_index}: {words}",
        reasoning=f"why-{req.sample_index}",
    )


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def direct(base_url: str, **kwargs: Any) -> AsyncIterator[OpenAICompatClient]:
    kwargs.setdefault("retry", FAST_RETRY)
    client = OpenAICompatClient(base_url, "scripted", **kwargs)
    try:
        yield client
    finally:
        await client.aclose()


@asynccontextmanager
async def langchain(base_url: str, **kwargs: Any) -> AsyncIterator[LangChainChatClient]:
    client = LangChainChatClient(make_chat_model(base_url, "scripted", **kwargs))
    try:
        yield client
    finally:
        await client.aclose()


ClientFactory = Callable[..., Any]


BOTH = pytest.mark.parametrize("make_client", [direct, langchain], ids=["direct", "langchain"])


@asynccontextmanager
async def serving(
    chat: Callable[[web.Request], Awaitable[web.StreamResponse]],
) -> AsyncIterator[str]:
    """A bare server on 127.0.0.1 whose ``/v1/chat/completions`` is ``chat``: its base URL.

    For servers that behave unlike ``ScriptedServer`` on purpose (llama.cpp quirks).
    """
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    finally:
        await runner.cleanup()


@asynccontextmanager
async def one_choice_server() -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """A llama.cpp-like server: ignores ``n`` and always answers with one choice."""
    bodies: list[dict[str, Any]] = []

    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        bodies.append(body)
        question = body["messages"][-1]["content"]
        content = f"single answer to {question}"
        return web.json_response(
            {
                "id": f"one-{len(bodies)}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 2, "completion_tokens": 4, "total_tokens": 6},
            }
        )

    async with serving(chat) as base_url:
        yield base_url, bodies
