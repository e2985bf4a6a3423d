"""A seeded run on the embedded model: K distinct, reproducible trajectories, one ``n=K`` request.

Issue 9: with ``--seed``, the samples of a round all carried the same seed, so
all four round-0 trajectories were identical. Each sample now has its own
seed (``pacore_graph.values.seeds``); the embedded server honours ``n`` and seeds
choice ``i`` with ``seed + i``, so the client's ``n``-batching path runs here
with real tokens (issue 25) and its samples are those a split would fetch.
"""

from __future__ import annotations

import pytest
from embedded_support import require_embedded

from pacore_graph.graph.builder import ainvoke_pacore, build_pacore_graph
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.settings.config import PaCoReConfig, SamplingParams
from pacore_graph.values.records import PaCoReResult

pytestmark = pytest.mark.embedded


async def _run(base_url: str, model: str, api_key: str | None) -> PaCoReResult:
    config = PaCoReConfig(
        rounds=(4,),
        sampling=SamplingParams(seed=1234, max_tokens=24, temperature=0.9),
        max_concurrency=4,
    )
    client = OpenAICompatClient(base_url, model, api_key=api_key)
    try:
        graph = build_pacore_graph(client, config=config)
        result = await ainvoke_pacore(graph, "Name a colour and say why you like it.")
    finally:
        await client.aclose()
    assert client.supports_n is True, "the embedded server must honour n (one request, K choices)"
    return result


async def test_seeded_embedded_run_gives_k_distinct_reproducible_trajectories() -> None:
    require_embedded()
    from pacore_graph.embedded import EmbeddedServer

    async with EmbeddedServer() as server:
        first = await _run(server.base_url, server.model, server.api_key)
    # A second invocation: a fresh server process, as a second `pacore run` would start.
    async with EmbeddedServer() as server:
        second = await _run(server.base_url, server.model, server.api_key)
    texts = [t.content for t in first.rounds[0]]
    assert not any(t.failed for t in first.rounds[0])
    assert len(set(texts)) == 4, f"round-0 trajectories are not distinct: {texts}"
    assert texts == [t.content for t in second.rounds[0]]
