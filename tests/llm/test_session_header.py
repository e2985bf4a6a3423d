"""The per-run session header, over real HTTP against the scripted server.

Every request of one PaCoRe run (all rounds, retries, ``n``-splits, streamed
rounds and the streamed final answer) carries the run's id in the session
header; two runs carry two ids; ``--session-header`` renames it and ``none``
turns it off. The scripted server logs each request's headers, and which run
a request belongs to is read from its prompt (each run asks its own
question), never from call order.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

import pytest

from pacore_graph import PaCoReConfig, ainvoke_pacore, build_pacore_graph
from pacore_graph.cli import main
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.llm.multi_client import chat_client_for
from pacore_graph.llm.session_header import (
    DEFAULT_SESSION_HEADER,
    current_session,
    parse_session_header,
    session_headers,
    session_scope,
)
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing import ScriptedRequest, ScriptedServer
from pacore_graph.testing.scripted_server import LoggedRequest
from pacore_graph.values.records import PaCoReResult

FAST_RETRY = ModelRetryPolicy(max_attempts=3, initial_backoff=0.001, max_backoff=0.01)
QUESTIONS = ("What is 2 + 2? (alpha)", "What is 3 + 3? (beta)")


def answer(req: ScriptedRequest) -> str:
    return f"sample {req.sample_index}: \\boxed{{4}}"


def question_of(request: LoggedRequest) -> str:
    """Which run a request belongs to: the question its prompt carries."""
    text = str(request.body.get("messages"))
    (found,) = [q for q in QUESTIONS if q in text]
    return found


async def run_both(base_url: str, **kwargs: Any) -> list[PaCoReResult]:
    session_header = kwargs.pop("session_header", DEFAULT_SESSION_HEADER)
    urls = kwargs.pop("urls", [base_url])
    client = chat_client_for(urls, "scripted", retry=FAST_RETRY, session_header=session_header)
    try:
        graph = build_pacore_graph(client, config=PaCoReConfig(retry=FAST_RETRY, **kwargs))
        return list(await asyncio.gather(*(ainvoke_pacore(graph, q) for q in QUESTIONS)))
    finally:
        await client.aclose()


def sessions_by_run(requests: list[LoggedRequest], header: str) -> dict[str, set[str | None]]:
    seen: dict[str, set[str | None]] = defaultdict(set)
    for request in requests:
        seen[question_of(request)].add(request.headers.get(header))
    return dict(seen)


def assert_one_session_per_run(
    requests: list[LoggedRequest], results: list[PaCoReResult], header: str
) -> None:
    seen = sessions_by_run(requests, header)
    expected = {q: {r.extra["run_id"]} for q, r in zip(QUESTIONS, results, strict=True)}
    assert seen == expected  # on every request, constant within a run
    assert len({r.extra["run_id"] for r in results}) == 2  # distinct across runs


async def test_every_request_of_a_run_carries_its_id_retries_included() -> None:
    # Each distinct body fails once: every call is retried, the retry must carry it too.
    async with ScriptedServer(answer, fail_first=1) as srv:
        results = await run_both(srv.base_url, rounds=[4, 2])
        requests = list(srv.requests)
    assert [r.status for r in requests].count(500) >= 6  # 3 rounds x 2 runs failed once
    assert all(r.failures == 0 for r in results)
    assert_one_session_per_run(requests, results, DEFAULT_SESSION_HEADER)


async def test_n_splits_carry_it() -> None:
    # A server that ignores n: the client asks the missing samples one request each.
    async with ScriptedServer(answer, ignore_n=True) as srv:
        results = await run_both(srv.base_url, rounds=[3])
        requests = list(srv.requests)
    assert sum(1 for r in requests if r.body.get("n") is None) >= 4  # the split singles
    assert_one_session_per_run(requests, results, DEFAULT_SESSION_HEADER)


async def test_streamed_rounds_and_the_streamed_answer_carry_it() -> None:
    async with ScriptedServer(answer) as srv:
        # round_quorum: the round is one streamed n=K request (stream_each).
        results = await run_both(
            srv.base_url, rounds=[4], round_quorum=4, sampling=SamplingParams(seed=0)
        )
        streamed_rounds = [r for r in srv.requests if r.body.get("stream")]
        assert len(streamed_rounds) == 2
        assert_one_session_per_run(list(srv.requests), results, DEFAULT_SESSION_HEADER)

        srv.reset_log()
        client = OpenAICompatClient(srv.base_url, "scripted", retry=FAST_RETRY)
        try:
            graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]))
            state = {"messages": [{"role": "user", "content": QUESTIONS[0]}]}
            final: Any = {}
            async for mode, chunk in graph.astream(state, stream_mode=["messages", "values"]):
                if mode == "values":
                    final = chunk
        finally:
            await client.aclose()
        run_id = final["result"].extra["run_id"]
        headers = [(r.body.get("stream"), r.headers.get("x-session-id")) for r in srv.requests]
    assert (True, run_id) in headers  # the final answer streamed over SSE
    assert {h for _, h in headers} == {run_id}


async def test_several_replicas_carry_it() -> None:
    async with ScriptedServer(answer) as one, ScriptedServer(answer) as two:
        results = await run_both(one.base_url, urls=[one.base_url, two.base_url], rounds=[4])
        requests = list(one.requests) + list(two.requests)
    assert one.requests and two.requests
    assert_one_session_per_run(requests, results, DEFAULT_SESSION_HEADER)


async def test_renamed_and_turned_off() -> None:
    async with ScriptedServer(answer) as srv:
        results = await run_both(srv.base_url, rounds=[2], session_header="X-Route-Key")
        assert_one_session_per_run(list(srv.requests), results, "x-route-key")
        assert all("x-session-id" not in r.headers for r in srv.requests)
        srv.reset_log()
        await run_both(srv.base_url, rounds=[2], session_header=None)
        assert srv.requests
        assert all("x-session-id" not in r.headers for r in srv.requests)


async def test_no_header_outside_a_run() -> None:
    async with ScriptedServer(answer) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", retry=FAST_RETRY)
        try:
            await client.complete([{"role": "user", "content": "hi"}], params=SamplingParams())
            with session_scope("s-1"):
                await client.complete([{"role": "user", "content": "hi"}], params=SamplingParams())
        finally:
            await client.aclose()
        assert [r.headers.get("x-session-id") for r in srv.requests] == [None, "s-1"]


def test_scope_is_restored() -> None:
    assert current_session() is None
    with session_scope("a"):
        with session_scope("b"):
            assert session_headers("x-s") == {"x-s": "b"}
        assert current_session() == "a"
        assert session_headers(None) is None
    assert session_headers("x-s") is None


@pytest.mark.parametrize(
    ("text", "name"),
    [(None, "x-session-id"), ("none", None), ("OFF", None), (" x-run ", "x-run")],
)
def test_parse_session_header(text: str | None, name: str | None) -> None:
    assert parse_session_header(text) == name


@pytest.mark.parametrize("text", ["x session", "x:id", "é"])
def test_parse_session_header_refuses_what_http_cannot_send(text: str) -> None:
    with pytest.raises(ValueError, match="not an HTTP header name"):
        parse_session_header(text)


def test_cli_flag_and_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = ["run", QUESTIONS[0], "--model", "scripted", "--rounds", "2", "--no-progress"]
    with ScriptedServer(answer).run_in_thread() as srv:
        assert main([*base, "--base-url", srv.base_url, "--session-header", "x-run"]) == 0
        ids = {r.headers.get("x-run") for r in srv.requests}
        assert len(ids) == 1 and None not in ids
        assert all("x-session-id" not in r.headers for r in srv.requests)
        srv.reset_log()
        monkeypatch.setenv("PACORE_SESSION_HEADER", "none")
        assert main([*base, "--base-url", srv.base_url]) == 0
        assert srv.requests and all("x-session-id" not in r.headers for r in srv.requests)
    capsys.readouterr()
    assert main([*base, "--base-url", "http://127.0.0.1:9/v1", "--session-header", "a b"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pacore: error: --session-header") and "\n" not in err
