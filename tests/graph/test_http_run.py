"""The whole PaCoRe graph over real HTTP, against the scripted server.

What only HTTP shows: how many requests each round really sends (and with
which ``n``), what the synthesis prompt on the wire holds, what failures look
like after the client's retries, and how many sequences are in flight on the
server at once. Replies are a function of the request, never of call order.
"""

from __future__ import annotations

import asyncio
import re
import socket
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp import web

from pacore_graph import (
    PaCoReConfig,
    RoundFailedError,
    ainvoke_pacore,
    build_pacore_graph,
)
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.llm.langchain_client import LangChainChatClient, make_chat_model
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing import (
    LoggedRequest,
    ScriptedReply,
    ScriptedRequest,
    ScriptedServer,
    count_tokens,
)
from pacore_graph.values.prompts import render_synthesis
from pacore_graph.values.records import PaCoReResult
from pacore_graph.values.seeds import explorer_seed

FAST_RETRY = ModelRetryPolicy(max_attempts=2, initial_backoff=0.001, max_backoff=0.01)
QUESTION = "How many primes are below 20?"
REF_RE = re.compile(r"^Reference (\d+):$", re.M)


def n_refs(text: str) -> int:
    return len(REF_RE.findall(text))


def by_input(req: ScriptedRequest) -> ScriptedReply:
    """Names the round (by its reference count), the sample and the seed; fixed token counts."""
    refs = n_refs(req.last_user)
    return ScriptedReply(
        content=f"refs={refs} sample={req.sample_index} seed={req.seed} -> {7 + refs}",
        reasoning=f"thinking hard about {refs} refs, sample {req.sample_index}",
        completion_tokens=10 + req.sample_index + refs,
    )


def last_user(body: dict[str, Any]) -> str:
    for message in reversed(body["messages"]):
        if message["role"] == "user":
            return str(message["content"])
    return ""


def parse_references(prompt: str) -> list[str]:
    """The messages of a rendered synthesis prompt, in prompt order."""
    _, sep, rest = prompt.partition("\nReference Responses:\n")
    assert sep, "not a synthesis prompt"
    body, sep, _ = rest.rpartition("\n\nNow, based on the original problem")
    assert sep, "synthesis prompt without its closing instruction"
    parts = re.split(r"\nReference (\d+):\n", body)
    assert parts[0] == ""
    numbers = [int(x) for x in parts[1::2]]
    assert numbers == list(range(1, len(numbers) + 1))
    return [text.removesuffix("\n") for text in parts[2::2]]


def samples_per_prompt(log: list[LoggedRequest]) -> dict[str, int]:
    """Sum of ``n`` over successful requests, per distinct prompt (last user message)."""
    counts: dict[str, int] = defaultdict(int)
    for req in log:
        if req.status == 200:
            counts[last_user(req.body)] += req.body.get("n", 1)
    return dict(counts)


def widths_by_round(log: list[LoggedRequest]) -> list[int]:
    """Samples per round, rounds told apart by how many references their prompt has."""
    per_prompt = samples_per_prompt(log)
    ordered = sorted(
        per_prompt.items(), key=lambda kv: (kv[0].startswith("You are given"), -n_refs(kv[0]))
    )
    return [count for _, count in ordered]


@asynccontextmanager
async def running(
    srv: ScriptedServer, base_url: str | None = None, **config: Any
) -> AsyncIterator[tuple[Any, OpenAICompatClient]]:
    config.setdefault("retry", FAST_RETRY)
    client = OpenAICompatClient(base_url or srv.base_url, "scripted", retry=config["retry"])
    try:
        yield build_pacore_graph(client, config=PaCoReConfig(**config)), client
    finally:
        await client.aclose()


async def run_once(srv: ScriptedServer, question: str = QUESTION, **config: Any) -> PaCoReResult:
    async with running(srv, **config) as (graph, _):
        return await ainvoke_pacore(graph, question)


# --------------------------------------------------------------------------- widths


async def test_rounds_send_k_samples_per_round_and_a_final_k1() -> None:
    async with ScriptedServer(by_input) as srv:
        result = await run_once(srv, rounds=[4, 2])
        log = list(srv.requests)
    assert [len(r) for r in result.rounds] == [4, 2, 1]
    # Batched: one request per round, with n = K (no n at all for K = 1).
    assert len(log) == 3
    assert [r.body.get("n") for r in log] == [4, 2, None]
    assert widths_by_round(log) == [4, 2, 1]
    assert last_user(log[0].body) == QUESTION
    assert [n_refs(last_user(r.body)) for r in log] == [0, 4, 2]
    # Effective TTC is exact: sum of (10 + sample + refs) over every sample.
    assert result.ttc_per_round == (10 + 11 + 12 + 13, 14 + 15, 12)
    assert result.effective_ttc == 46 + 29 + 12
    assert [t.tokens_estimated for t in result.trajectories] == [True] * 6 + [False]
    # The answer is the final round's message, produced from a 2-reference prompt.
    assert result.answer == "refs=2 sample=0 seed=None -> 9"
    assert result.model == "scripted"


async def test_next_round_prompt_holds_exactly_the_previous_messages() -> None:
    async with ScriptedServer(by_input) as srv:
        result = await run_once(srv, rounds=[4, 2], shuffle_seed=3)
        log = list(srv.requests)
    prompts = {n_refs(last_user(r.body)): last_user(r.body) for r in log}
    for r in (1, 2):
        previous = result.rounds[r - 1]
        refs = result.rounds[r][0].references
        assert all(t.references == refs for t in result.rounds[r])
        assert sorted(refs) == [t.index for t in previous]
        expected = [previous[i].message for i in refs]
        on_the_wire = parse_references(prompts[len(previous)])
        assert on_the_wire == expected
        assert prompts[len(previous)] == render_synthesis(QUESTION, on_the_wire)
        # Compaction: reasoning stays out of the next round's input.
        assert not any(t.reasoning and t.reasoning in prompts[len(previous)] for t in previous)
        assert f"Original Problem:\n{QUESTION}\n" in prompts[len(previous)]


async def test_shuffling_is_deterministic_across_runs() -> None:
    async def round1(seed: int | None) -> tuple[tuple[int, ...], list[str]]:
        async with ScriptedServer(by_input) as srv:
            result = await run_once(srv, rounds=[6], shuffle_seed=seed)
            prompt = next(last_user(r.body) for r in srv.requests if n_refs(last_user(r.body)))
        return result.rounds[1][0].references, parse_references(prompt)

    first, second = await round1(11), await round1(11)
    assert first == second
    refs, texts = first
    assert sorted(refs) == list(range(6))
    assert refs != tuple(range(6))  # actually shuffled
    assert texts == [f"refs=0 sample={i} seed=None -> 7" for i in refs]
    unshuffled, _ = await round1(None)
    assert unshuffled == tuple(range(6))


async def test_batching_off_sends_one_request_per_explorer() -> None:
    async with ScriptedServer(by_input) as srv:
        unbatched = await run_once(srv, rounds=[4, 2], batch_samples=False, sampling={"seed": 100})
        log_off = list(srv.requests)
        srv.reset_log()
        batched = await run_once(srv, rounds=[4, 2], sampling={"seed": 100})
        log_on = list(srv.requests)
    assert len(log_off) == 4 + 2 + 1
    assert all("n" not in r.body for r in log_off)
    every_seed = [explorer_seed(100, r, i) for r, k in enumerate([4, 2, 1]) for i in range(k)]
    assert sorted(r.body["seed"] for r in log_off) == every_seed
    assert widths_by_round(log_off) == [4, 2, 1]
    # Each explorer's answer comes from its own request (its own seed).
    for t in unbatched.trajectories:
        seed = explorer_seed(100, t.round, t.index)
        assert t.content.startswith(f"refs={[0, 4, 2][t.round]} sample=0 seed={seed} ")
        assert t.tokens_estimated is False
    # Batched: one request per round, the round's seed shared, samples told apart by index.
    assert [(r.body.get("n"), r.body["seed"]) for r in log_on] == [
        (4, explorer_seed(100, 0, 0)),
        (2, explorer_seed(100, 1, 0)),
        (None, explorer_seed(100, 2, 0)),
    ]
    assert [len(r) for r in batched.rounds] == [len(r) for r in unbatched.rounds] == [4, 2, 1]
    assert [t.content.split(" -> ")[0] for t in batched.rounds[0]] == [
        f"refs=0 sample={i} seed=100" for i in range(4)
    ]


# --------------------------------------------------------------------------- failures


async def test_failed_explorers_are_recorded_and_left_out() -> None:
    def fail_odd_round0(req: ScriptedRequest) -> int | None:
        return 500 if req.seed in (101, 103) else None

    async with ScriptedServer(by_input, fail_when=fail_odd_round0) as srv:
        result = await run_once(srv, rounds=[4], batch_samples=False, sampling={"seed": 100})
        log = list(srv.requests)
    round0 = result.rounds[0]
    assert [t.failed for t in round0] == [False, True, False, True]
    for t in (round0[1], round0[3]):
        assert t.message is None
        assert t.error is not None
        assert "HTTP 500" in t.error
        assert "gave up after 2 attempts" in t.error
        assert t.completion_tokens == 0
    # Each failing explorer was tried max_attempts times; the others once.
    statuses: dict[int, list[int]] = defaultdict(list)
    for r in log:
        statuses[r.body["seed"]].append(r.status)
    assert statuses[101] == statuses[103] == [500, 500]
    assert statuses[100] == statuses[102] == [200]
    # The next round sees only the two surviving messages.
    final = result.rounds[1][0]
    assert sorted(final.references) == [0, 2]
    prompt = next(last_user(r.body) for r in log if r.body["seed"] == 1100)
    assert sorted(parse_references(prompt)) == sorted(
        [round0[0].message or "", round0[2].message or ""]
    )
    assert result.failures == 2
    assert result.effective_ttc == 10 + 10 + 12  # two successes of round 0, then the final
    assert result.answer.startswith("refs=2 ")


async def test_whole_round_failing_raises_round_failed_error() -> None:
    async with ScriptedServer(by_input, fail_when=lambda req: 503) as srv:
        with pytest.raises(RoundFailedError) as info:
            await run_once(srv, rounds=[3])
        assert len(srv.requests) == FAST_RETRY.max_attempts
    assert info.value.round_index == 0
    assert "all 3 explorer calls failed" in str(info.value)
    assert "HTTP 503" in str(info.value)
    assert len(info.value.errors) == 3


async def test_unreachable_server_raises_round_failed_error_naming_the_cause() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    client = OpenAICompatClient(url, "scripted", retry=FAST_RETRY)
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[4], retry=FAST_RETRY))
    try:
        with pytest.raises(RoundFailedError) as info:
            await ainvoke_pacore(graph, QUESTION)
    finally:
        await client.aclose()
    message = str(info.value)
    assert "round 0" in message
    assert "all 4 explorer calls failed" in message
    assert "cannot reach" in message
    assert f"{url}/chat/completions" in message
    assert all("cannot reach" in e for e in info.value.errors)


# --------------------------------------------------------------------------- concurrency


@dataclass
class InFlight:
    now: int = 0
    peak: int = 0
    requests: int = 0


@asynccontextmanager
async def counting_server(
    respond: Callable[[ScriptedRequest], Any], latency: float
) -> AsyncIterator[tuple[str, InFlight]]:
    """The scripted server's app behind a middleware counting samples (sum of n) in flight."""
    stats = InFlight()
    srv = ScriptedServer(respond, latency=latency)

    @web.middleware
    async def count(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.method != "POST":
            return await handler(request)  # type: ignore[no-any-return]
        n = (await request.json()).get("n") or 1  # the body is cached for the handler
        stats.requests += 1
        stats.now += n
        stats.peak = max(stats.peak, stats.now)
        try:
            return await handler(request)  # type: ignore[no-any-return]
        finally:
            stats.now -= n

    app = srv.make_app()
    app.middlewares.append(count)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1", stats
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("batch", [True, False], ids=["batched", "unbatched"])
async def test_max_concurrency_bounds_samples_in_flight(batch: bool) -> None:
    async with counting_server(by_input, latency=0.03) as (url, stats):
        client = OpenAICompatClient(url, "scripted", retry=FAST_RETRY)
        config = PaCoReConfig(
            rounds=[8], max_concurrency=3, batch_samples=batch, sampling=SamplingParams(seed=5)
        )
        try:
            result = await ainvoke_pacore(build_pacore_graph(client, config=config), QUESTION)
        finally:
            await client.aclose()
    assert [len(r) for r in result.rounds] == [8, 1]
    assert stats.peak == 3  # reached, never exceeded
    # Batched: round 0 is cut into n=3,3,2 chunks; unbatched: one request per sample.
    assert stats.requests == (3 + 1 if batch else 8 + 1)


async def test_concurrency_limit_is_shared_by_problems_on_one_graph() -> None:
    async with counting_server(by_input, latency=0.03) as (url, stats):
        client = OpenAICompatClient(url, "scripted", retry=FAST_RETRY)
        graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[4], max_concurrency=4))
        try:
            results = await asyncio.gather(
                *(ainvoke_pacore(graph, f"problem {i}", problem_id=f"p{i}") for i in range(3))
            )
        finally:
            await client.aclose()
    assert [r.problem_id for r in results] == ["p0", "p1", "p2"]
    assert stats.peak == 4
    assert stats.requests == 3 * 2


# --------------------------------------------------------------------------- reasoning


@pytest.mark.parametrize("mode", ["reasoning", "reasoning_content"])
async def test_reasoning_field_is_kept_and_message_is_the_content(mode: str) -> None:
    async with ScriptedServer(by_input, reasoning_mode=mode) as srv:  # type: ignore[arg-type]
        result = await run_once(srv, rounds=[2])
    for t in result.trajectories:
        assert t.reasoning is not None
        assert t.reasoning.startswith("thinking hard about ")
        assert t.message == t.content
        assert "thinking" not in t.content
    assert result.reasoning == result.final.reasoning == "thinking hard about 2 refs, sample 0"
    assert result.answer == result.final.content


async def test_without_reasoning_parser_think_tags_are_compacted() -> None:
    def inline(req: ScriptedRequest) -> str:
        return f"<think>scratch {req.sample_index}</think>final {n_refs(req.last_user)}"

    async with ScriptedServer(inline, reasoning_mode="none") as srv:
        result = await run_once(srv, rounds=[3])
        prompt = last_user(srv.requests[1].body)
    assert all(t.reasoning is None for t in result.trajectories)
    assert [t.message for t in result.rounds[0]] == ["final 0"] * 3
    assert parse_references(prompt) == ["final 0"] * 3
    assert "scratch" not in prompt
    assert result.answer == "final 3"
    assert result.effective_ttc == sum(count_tokens(t.content) for t in result.trajectories)


async def test_graph_runs_over_langchain_client() -> None:
    async with ScriptedServer(by_input) as srv:
        chat = make_chat_model(srv.base_url, "scripted", retry=FAST_RETRY)
        try:
            graph = build_pacore_graph(LangChainChatClient(chat), config=PaCoReConfig(rounds=[3]))
            result = await ainvoke_pacore(graph, QUESTION)
        finally:
            await chat.root_async_client.close()
        log = list(srv.requests)
    assert [r.body.get("n") for r in log] == [3, None]
    assert [len(r) for r in result.rounds] == [3, 1]
    assert result.answer == "refs=3 sample=0 seed=None -> 10"
    assert result.reasoning == "thinking hard about 3 refs, sample 0"
    assert result.effective_ttc == 10 + 11 + 12 + 13
