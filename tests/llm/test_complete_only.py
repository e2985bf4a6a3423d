"""A client with only ``complete`` (the protocol's first form) is adapted where it is given.

Tested over real HTTP too: a complete-only wrapper around the direct client
runs a PaCoRe graph against the scripted server.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from pacore_graph import build_pacore_graph
from pacore_graph.errors import ModelCallError, UpstreamStatusError
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.llm.complete_only import CompleteOnlyClient, chat_client
from pacore_graph.llm.protocols import ChatClient
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing import ScriptedServer
from pacore_graph.values.records import Completion

PARAMS = SamplingParams(max_tokens=16)


class Completes:
    """The first protocol: a model and ``complete``; "fail" in the prompt fails the call."""

    model = "m"
    base_url = "http://127.0.0.1:9/v1"

    def __init__(self) -> None:
        self.closed = 0

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        params: SamplingParams,
        seed: int | None = None,
    ) -> list[Completion]:
        text = str(messages[-1]["content"])
        if "fail" in text:
            raise UpstreamStatusError("HTTP 503 busy", status=503)
        return [Completion(content=f"{text} #{j}") for j in range(n)]

    async def aclose(self) -> None:
        self.closed += 1


async def test_a_complete_only_client_becomes_a_chat_client() -> None:
    inner = Completes()
    client = chat_client(inner)
    assert isinstance(client, CompleteOnlyClient) and isinstance(client, ChatClient)
    assert client.model == "m" and client.base_url == inner.base_url  # traces still see it
    ok = await client.complete_each([{"role": "user", "content": "Q"}], n=2, params=PARAMS)
    assert [c.content for c in ok if isinstance(c, Completion)] == ["Q #0", "Q #1"]
    failed = await client.complete_each([{"role": "user", "content": "fail"}], n=2, params=PARAMS)
    assert len(failed) == 2 and all(isinstance(e, ModelCallError) for e in failed)
    async with client:
        pass
    assert inner.closed == 1


async def test_a_full_client_is_itself_and_anything_else_is_refused() -> None:
    direct = OpenAICompatClient("http://127.0.0.1:9/v1", "m")
    try:
        assert chat_client(direct) is direct
    finally:
        await direct.aclose()
    for junk in (object(), "http://x", type("NoModel", (), {"complete": Completes.complete})()):
        with pytest.raises(TypeError, match="complete_each"):
            chat_client(junk)


async def test_a_graph_runs_on_a_complete_only_client_over_http() -> None:
    class Wrapped:
        """What a user wrote against the first protocol: only ``complete``."""

        def __init__(self, inner: OpenAICompatClient) -> None:
            self.inner = inner
            self.model = inner.model

        async def complete(self, messages: Any, **kwargs: Any) -> list[Completion]:
            return await self.inner.complete(messages, **kwargs)

    async with (
        ScriptedServer() as srv,
        OpenAICompatClient(srv.base_url, "scripted", retry=ModelRetryPolicy()) as inner,
    ):
        graph = build_pacore_graph(client=Wrapped(inner), config={"rounds": [3]})
        out = await graph.ainvoke({"messages": [{"role": "user", "content": "What is 2+2?"}]})
        assert out["answer"]
        assert [r.body.get("n", 1) for r in srv.requests] == [3, 1]
