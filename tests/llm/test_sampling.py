"""Getting K samples through real HTTP when things go wrong (issue 11 items 10-12, issue 9 seeds).

Every test talks to a real :class:`ScriptedServer` on loopback with the real
clients; replies depend on the request (prompt, seed, sample index), never on
call order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from pacore_graph.errors import ModelCallError
from pacore_graph.graph.builder import ainvoke_pacore, build_pacore_graph
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.llm.langchain_client import LangChainChatClient, make_chat_model
from pacore_graph.settings.config import ModelRetryPolicy, PaCoReConfig, SamplingParams
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer
from pacore_graph.values.records import Completion
from pacore_graph.values.seeds import explorer_seed

PARAMS = SamplingParams()
ONE_TRY = ModelRetryPolicy(max_attempts=1)
FAST = ModelRetryPolicy(max_attempts=3, initial_backoff=0.001, max_backoff=0.002)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


@asynccontextmanager
async def direct(url: str, retry: ModelRetryPolicy = FAST) -> AsyncIterator[OpenAICompatClient]:
    client = OpenAICompatClient(url, "scripted", retry=retry)
    try:
        yield client
    finally:
        await client.aclose()


@asynccontextmanager
async def langchain(url: str, retry: ModelRetryPolicy = FAST) -> AsyncIterator[LangChainChatClient]:
    client = LangChainChatClient(make_chat_model(url, "scripted", retry=retry), model="scripted")
    try:
        yield client
    finally:
        await client.aclose()


def seeds_sent(srv: ScriptedServer) -> list[Any]:
    return sorted((r.body.get("seed") for r in srv.requests), key=lambda s: (s is None, s))


# --------------------------------------------------------------------------- seeds


@pytest.mark.parametrize("make", [direct, langchain], ids=["direct", "langchain"])
async def test_server_ignoring_n_gets_one_seed_per_sample(make: Callable[..., Any]) -> None:
    async with ScriptedServer(ignore_n=True) as srv, make(srv.base_url) as client:
        out = await client.complete(user("Q"), n=4, params=PARAMS, seed=10)
    assert len(out) == 4
    assert seeds_sent(srv) == [10, 11, 12, 13]
    assert [c.seed for c in out] == [10, 11, 12, 13], "each sample knows its request's seed"
    assert len({c.content for c in out}) == 4, "every sample must differ"


async def test_seeded_graph_on_a_server_ignoring_n_gives_k_distinct_trajectories() -> None:
    config = PaCoReConfig(rounds=(4,), sampling=SamplingParams(seed=5))
    async with ScriptedServer(ignore_n=True) as srv, direct(srv.base_url) as client:
        graph = build_pacore_graph(client, config=config)
        first = await ainvoke_pacore(graph, "What is 2+2?")
        srv.reset_log()
        second = await ainvoke_pacore(graph, "What is 2+2?")
    texts = [t.content for t in first.rounds[0]]
    assert len(set(texts)) == 4
    assert texts == [t.content for t in second.rounds[0]]
    # Round 0 went out with explorers 0..3's seeds, round 1 with its own.
    assert seeds_sent(srv) == [explorer_seed(5, 0, i) for i in range(4)] + [explorer_seed(5, 1, 0)]


# --------------------------------------------------------------------------- partial failures


def fail_batches(req: ScriptedRequest) -> int | None:
    """Any request for more than two samples fails: only smaller requests get through."""
    n = req.params.get("n") or 1
    return 500 if n > 2 else None


@pytest.mark.parametrize("make", [direct, langchain], ids=["direct", "langchain"])
async def test_a_failed_batch_is_retried_in_smaller_requests(make: Callable[..., Any]) -> None:
    async with (
        ScriptedServer(fail_when=fail_batches) as srv,
        make(srv.base_url, retry=ONE_TRY) as client,
    ):
        out = await client.complete(user("Q"), n=4, params=PARAMS, seed=20)
    assert len(out) == 4
    ns = sorted((r.body.get("n") or 1, r.status) for r in srv.requests)
    assert ns == [(2, 200), (2, 200), (4, 500)]
    # The two halves carry the seeds of their first samples.
    assert seeds_sent(srv) == [20, 20, 22]


async def test_one_failed_sample_fails_only_its_explorer() -> None:
    def fail(req: ScriptedRequest) -> int | None:
        n = req.params.get("n") or 1
        return 500 if n > 1 or req.seed == 102 else None

    config = PaCoReConfig(rounds=(4,), sampling=SamplingParams(seed=100), retry=ONE_TRY)
    async with ScriptedServer(fail_when=fail) as srv, direct(srv.base_url, ONE_TRY) as client:
        graph = build_pacore_graph(client, config=config)
        result = await ainvoke_pacore(graph, "Q")
    failed = [t.index for t in result.rounds[0] if t.failed]
    assert failed == [2], "only explorer 2 (seed 102) failed"
    assert result.failures == 1


async def test_without_a_working_batch_each_sample_still_comes_back() -> None:
    """Issue 11 item 11: one HTTP failure used to fail all K samples of a round."""
    config = PaCoReConfig(rounds=(4,), retry=ONE_TRY)
    async with (
        ScriptedServer(fail_when=fail_batches) as srv,
        direct(srv.base_url, ONE_TRY) as client,
    ):
        graph = build_pacore_graph(client, config=config)
        result = await ainvoke_pacore(graph, "Q")
    assert result.failures == 0
    assert len(result.rounds[0]) == 4


# --------------------------------------------------------------------------- content: null


def thinks_too_long_for_sample_1(req: ScriptedRequest) -> ScriptedReply:
    if req.sample_index == 1:
        return ScriptedReply(content="late", reasoning="one two three four five six seven")
    return ScriptedReply(content=f"ok {req.sample_index}")


@pytest.mark.parametrize("make", [direct, langchain], ids=["direct", "langchain"])
async def test_content_null_is_a_failed_sample_with_its_cause(make: Callable[..., Any]) -> None:
    params = SamplingParams(max_tokens=4)
    async with ScriptedServer(thinks_too_long_for_sample_1) as srv, make(srv.base_url) as client:
        outcomes = await client.complete_each(user("Q"), n=3, params=params)
        with pytest.raises(ModelCallError, match="content: null"):
            await client.complete(user("Q"), n=3, params=params)
    assert isinstance(outcomes[0], Completion) and outcomes[0].content == "ok 0"
    assert isinstance(outcomes[1], ModelCallError)
    assert "content: null" in str(outcomes[1]) and "length" in str(outcomes[1])
    assert isinstance(outcomes[2], Completion)


async def test_content_null_makes_a_failed_trajectory_in_a_run() -> None:
    config = PaCoReConfig(rounds=(3,), sampling=SamplingParams(max_tokens=4))
    async with ScriptedServer(thinks_too_long_for_sample_1) as srv, direct(srv.base_url) as client:
        graph = build_pacore_graph(client, config=config)
        result = await ainvoke_pacore(graph, "Q")
    assert result.to_dict()["failures"] == 1
    (bad,) = [t for t in result.rounds[0] if t.failed]
    assert bad.error is not None and "content: null" in bad.error
    assert bad.message is None


# --------------------------------------------------------------------------- retries


# --------------------------------------------------------------------------- bad text


@pytest.mark.parametrize("make", [direct, langchain], ids=["direct", "langchain"])
async def test_text_that_is_not_utf8_is_refused_before_sending(make: Callable[..., Any]) -> None:
    async with ScriptedServer() as srv, make(srv.base_url) as client:
        with pytest.raises(ModelCallError, match="not valid UTF-8"):
            await client.complete(user("caf\udce9"), params=PARAMS)
    assert srv.request_count == 0


async def test_an_overloaded_server_is_not_asked_again_in_smaller_requests() -> None:
    """A 503/429 is the whole server saying "busy": splitting would only add load."""
    async with (
        ScriptedServer(fail_when=lambda req: 503) as srv,
        direct(srv.base_url, ONE_TRY) as client,
    ):
        outcomes = await client.complete_each(user("Q"), n=4, params=PARAMS)
    assert all(isinstance(o, ModelCallError) and o.status == 503 for o in outcomes)
    assert srv.request_count == 1


async def test_a_stream_without_content_is_a_failure_with_its_cause() -> None:
    params = SamplingParams(max_tokens=4)

    def thinks_too_long(req: ScriptedRequest) -> ScriptedReply:
        return ScriptedReply(content="late", reasoning="one two three four five six seven")

    async def ignore(kind: str, text: str) -> None:
        return None

    async with ScriptedServer(thinks_too_long) as srv, direct(srv.base_url) as client:
        with pytest.raises(ModelCallError, match="no content"):
            await client.stream(user("Q"), params=params, on_delta=ignore)


_CLIENT_SCRIPT = """
import asyncio, sys
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.llm.multi_client import MultiEndpointClient
from pacore_graph.settings.config import SamplingParams

url, closing = sys.argv[1], sys.argv[2] == "with"
HI = [{"role": "user", "content": "hi"}]


async def main():
    for client in (OpenAICompatClient(url, "m"), MultiEndpointClient([url], "m")):
        if closing:
            async with client:
                out = await client.complete(HI, n=2, params=SamplingParams())
        else:
            out = await client.complete(HI, n=2, params=SamplingParams())
        print(type(client).__name__, len(out))

asyncio.run(main())
"""


def test_clients_used_with_async_with_leave_nothing_open(tmp_path: Any) -> None:
    """``async with`` closes the pooled sessions: no "Unclosed client session" at exit.

    Both shipped HTTP clients run in one process (aiohttp warns when the
    interpreter collects an open session, at exit); the same script without
    ``async with`` does warn, so the check can fail.
    """
    import subprocess
    import sys

    script = tmp_path / "client.py"
    script.write_text(_CLIENT_SCRIPT)
    with ScriptedServer().run_in_thread() as srv:
        runs = {
            how: subprocess.run(
                [sys.executable, str(script), srv.base_url, how],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            for how in ("with", "without")
        }
    assert runs["with"].returncode == 0, runs["with"].stderr
    assert runs["with"].stdout.split() == ["OpenAICompatClient", "2", "MultiEndpointClient", "2"]
    assert runs["with"].stderr == ""
    assert runs["without"].stderr.count("Unclosed client session") == 2
