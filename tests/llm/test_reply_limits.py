"""The clients against a hostile upstream over real HTTP on loopback (issue 18, part 3).

Each attack is chosen by a marker in the prompt (:mod:`pacore_graph.testing.hostile_upstream`):
huge bodies are read under a cap and fail as ``response_too_large`` without
being read to the end; answers of the wrong shape fail as ONE
``ModelCallError(kind="malformed")`` with a one-line cause; a trickling
upstream is cut by the call's deadline, whatever the retries and ``n``-splits.
Assertions are on what the limits caused (error kinds, request counters,
whether the server got to write its body to the end), never on wall time.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pacore_graph.errors import ModelCallError
from pacore_graph.graph.records import Completion
from pacore_graph.llm.client import OpenAICompatClient, parse_chat_choices
from pacore_graph.llm.langchain_client import LangChainChatClient, make_chat_model
from pacore_graph.llm.multi_client import MultiEndpointClient
from pacore_graph.llm.reply_limits import SLACK_BYTES, UNSET_MAX_TOKENS, reply_cap
from pacore_graph.llm.sampling import SampleOutcome
from pacore_graph.settings.config import RetryPolicy, SamplingParams
from pacore_graph.testing.hostile_upstream import (
    MALFORMED_ATTACKS,
    MALFORMED_EVENT_ATTACKS,
    HostileServer,
    marker,
)

FAST = RetryPolicy(max_attempts=4, initial_backoff=0.001, max_backoff=0.01)
SMALL = SamplingParams(max_tokens=16, timeout=30)
#: Comfortably over the cap for ``SMALL`` (about 1 MiB), and more than loopback
#: socket buffers hold, so "written to the end" means the client read it all.
HUGE = 48 << 20


def ask(attack: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"What is 2+2? {marker(attack)}"}]


@contextlib.asynccontextmanager
async def hostile(
    retry: RetryPolicy = FAST, **kwargs: Any
) -> AsyncIterator[tuple[HostileServer, OpenAICompatClient]]:
    async with HostileServer(**kwargs) as server:
        client = OpenAICompatClient(server.base_url, "m", retry=retry)
        try:
            yield server, client
        finally:
            await client.aclose()


def errors(outcomes: list[SampleOutcome]) -> list[ModelCallError]:
    assert all(isinstance(o, ModelCallError) for o in outcomes), outcomes
    return [o for o in outcomes if isinstance(o, ModelCallError)]


# --------------------------------------------------------------------------- the cap


def test_the_cap_grows_with_max_tokens_n_logprobs_and_streaming() -> None:
    base = {"messages": [], "max_tokens": 100}
    plain = reply_cap(base, request_bytes=0)
    assert plain == SLACK_BYTES + 100 * 128
    assert reply_cap({**base, "n": 4}, request_bytes=0) - SLACK_BYTES == 4 * (plain - SLACK_BYTES)
    with_logprobs = reply_cap({**base, "logprobs": True, "top_logprobs": 20}, request_bytes=0)
    assert with_logprobs - SLACK_BYTES == 100 * (128 + 256 * 21)
    assert reply_cap(base, request_bytes=0, streamed=True) > plain
    assert reply_cap(base, request_bytes=1000) == plain + 8 * 1000
    unset = reply_cap({"messages": []}, request_bytes=0)
    assert unset == SLACK_BYTES + UNSET_MAX_TOKENS * 128


def test_the_cap_keeps_a_real_vllm_answer_with_top_logprobs() -> None:
    """A vLLM-shaped answer at max_tokens with 20 top log-probs per token fits its cap."""
    tokens = 200
    entry = {
        "token": "\u00e9t\u00e9",
        "logprob": -0.123456789012345,
        "bytes": [195, 169, 116, 195, 169],
    }
    logprobs = [{**entry, "top_logprobs": [entry] * 20} for _ in range(tokens)]
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": "\u00e9t\u00e9 " * tokens, "reasoning": None},
        "logprobs": {"content": logprobs},
        "finish_reason": "length",
        "token_ids": list(range(100_000, 100_000 + tokens)),
    }
    body = json.dumps({"choices": [choice], "usage": {"prompt_tokens": 9}}).encode()
    request = {"messages": [], "max_tokens": tokens, "logprobs": True, "top_logprobs": 20}
    cap = reply_cap(request, request_bytes=0)
    assert len(body) < cap - SLACK_BYTES  # fits without the slack's help


# --------------------------------------------------------------------------- huge bodies


@pytest.mark.parametrize("attack", ["huge_body", "huge_declared"])
async def test_a_huge_body_fails_as_response_too_large_unread(attack: str) -> None:
    async with hostile(size=HUGE) as (server, client):
        outcomes = await client.complete_each(ask(attack), n=1, params=SMALL)
    (error,) = errors(outcomes)
    assert error.kind == "response_too_large"
    assert "response too large" in str(error) and "\n" not in str(error)
    assert not error.retryable and error.attempts == 1
    assert server.attacks_sent[attack] == 1  # not retried, not split
    assert server.completed.get(attack, 0) == 0  # the client hung up: not read to the end


async def test_a_gzip_bomb_is_capped_on_what_it_unpacks_to() -> None:
    """48 KB on the wire, 48 MiB unpacked: the cap counts the unpacked bytes."""
    async with hostile(size=HUGE) as (server, client):
        (error,) = errors(await client.complete_each(ask("gzip_bomb"), n=1, params=SMALL))
    assert error.kind == "response_too_large"
    assert server.attacks_sent["gzip_bomb"] == 1


async def test_n_samples_of_a_huge_answer_fail_together_without_splitting() -> None:
    async with hostile(size=HUGE) as (server, client):
        outcomes = await client.complete_each(ask("huge_body"), n=4, params=SMALL)
    assert [e.kind for e in errors(outcomes)] == ["response_too_large"] * 4
    assert server.attacks_sent["huge_body"] == 1


async def test_an_answer_just_under_its_cap_is_read() -> None:
    """The cap cuts what is over it, not a big answer that fits (content of ~900 KB)."""
    async with hostile(size=900_000) as (_server, client):
        (outcome,) = await client.complete_each(ask("huge_body"), n=1, params=SMALL)
    assert isinstance(outcome, Completion)
    assert len(outcome.content) == 900_000


async def test_a_huge_error_body_is_read_only_to_its_head() -> None:
    async with hostile(size=HUGE) as (server, client):
        one = RetryPolicy(max_attempts=1)
        client.retry = one
        (error,) = errors(await client.complete_each(ask("huge_error"), n=1, params=SMALL))
    assert error.kind == "status" and error.status == 500
    assert len(str(error)) < 500 and "\n" not in str(error)
    assert server.completed.get("huge_error", 0) == 0


@pytest.mark.parametrize("attack", ["sse_huge_line", "sse_endless"])
async def test_a_huge_event_stream_fails_as_response_too_large(attack: str) -> None:
    async with hostile(size=HUGE) as (server, client):
        got = [o async for o in client.stream_each(ask(attack), n=2, params=SMALL)]
    assert sorted(i for i, _ in got) == [0, 1]
    assert {e.kind for e in errors([o for _, o in got])} == {"response_too_large"}
    assert server.attacks_sent[attack] == 1
    assert server.completed.get(attack, 0) == 0


async def test_one_event_longer_than_a_whole_answer_fails_before_the_stream_cap() -> None:
    """3 MiB in one line: under the stream's cap (5.4 MiB), over one answer's (1.5 MiB)."""
    params = SamplingParams(max_tokens=2000, timeout=30)
    async with hostile(size=3 << 20) as (server, client):
        got = [o async for o in client.stream_each(ask("sse_huge_line"), n=2, params=params)]
    failures = errors([o for _, o in got])
    assert {e.kind for e in failures} == {"response_too_large"}
    assert "the event from" in str(failures[0])
    assert server.attacks_sent["sse_huge_line"] == 1


@pytest.mark.parametrize("n", [1, 2])
async def test_many_small_events_keep_no_more_than_a_whole_answer(n: int) -> None:
    """Endless 16-character deltas: the kept text stops at one answer's cap (1.5 MiB at
    2000 tokens), long before the stream's own cap (5.4 MiB) is read."""
    params = SamplingParams(max_tokens=2000, timeout=30)
    async with hostile(size=HUGE) as (_server, client):
        if n == 1:

            async def ignore(kind: str, text: str) -> None:
                return None

            with pytest.raises(ModelCallError) as caught:
                await client.stream(ask("sse_endless"), params=params, on_delta=ignore)
            failures = [caught.value]
        else:
            got = [o async for o in client.stream_each(ask("sse_endless"), n=n, params=params)]
            failures = errors([o for _, o in got])
    assert {e.kind for e in failures} == {"response_too_large"}
    assert "streamed answer" in str(failures[0])


async def test_the_single_sample_stream_is_capped_too() -> None:
    async def ignore(kind: str, text: str) -> None:
        return None

    async with hostile(size=HUGE) as (server, client):
        with pytest.raises(ModelCallError) as caught:
            await client.stream(ask("sse_huge_line"), params=SMALL, on_delta=ignore)
    assert caught.value.kind == "response_too_large"
    assert server.completed.get("sse_huge_line", 0) == 0


# --------------------------------------------------------------------------- malformed answers


@pytest.mark.parametrize("attack", sorted([*MALFORMED_ATTACKS, "not_json"]))
async def test_a_malformed_answer_is_one_malformed_error(attack: str) -> None:
    async with hostile() as (server, client):
        outcomes = await client.complete_each(ask(attack), n=4, params=SMALL)
        url = server.base_url
    failures = errors(outcomes)
    assert len(failures) == 4 and len({id(e) for e in failures}) == 1  # ONE error, shared
    error = failures[0]
    assert error.kind == "malformed", str(error)
    assert "\n" not in str(error) and len(str(error)) < 500
    assert not error.retryable
    assert server.attacks_sent[attack] == 1  # neither retried nor split
    assert "malformed" in error.public_message() and url not in error.public_message()


async def test_forty_choices_for_n_4_are_refused_not_cut() -> None:
    async with hostile() as (_server, client):
        outcomes = await client.complete_each(ask("too_many_choices"), n=4, params=SMALL)
    assert "40 choices for n=4" in str(errors(outcomes)[0])


@pytest.mark.parametrize("attack", sorted(MALFORMED_EVENT_ATTACKS))
async def test_a_malformed_stream_event_is_one_malformed_error(attack: str) -> None:
    async with hostile() as (_server, client):
        got = dict([o async for o in client.stream_each(ask(attack), n=2, params=SMALL)])
    assert sorted(got) == [0, 1]
    kinds = {e.kind for e in errors(list(got.values()))}
    assert kinds == {"malformed"}, [str(e) for e in got.values()]
    assert all("\n" not in str(e) for e in got.values())


@pytest.mark.parametrize(
    ("usage", "why"),
    [
        ({"completion_tokens": -1_999_999_999}, "outside"),
        ({"completion_tokens": float("inf")}, "not a number"),
        ({"completion_tokens": float("nan")}, "not a number"),
        ({"prompt_tokens": "lots"}, "not a number"),
        ({"prompt_tokens": [1]}, "not a number"),
        ({"prompt_tokens": True}, "not a number"),
        ({"completion_tokens": 2.5}, "not a number"),
        ({"completion_tokens": 10**12}, "outside"),
    ],
)
def test_usage_is_checked(usage: dict[str, Any], why: str) -> None:
    data = {"choices": [{"index": 0, "message": {"content": "x"}}], "usage": usage}
    with pytest.raises(ModelCallError, match=why) as caught:
        parse_chat_choices(data, latency_s=0.0, n=1)
    assert caught.value.kind == "malformed"


def test_integral_usage_floats_and_absent_indexes_are_fine() -> None:
    data = {
        "choices": [{"message": {"content": "a"}}, {"message": {"content": "b"}}],
        "usage": {"prompt_tokens": 3.0, "completion_tokens": 4},
    }
    out = parse_chat_choices(data, latency_s=0.0, n=2)
    assert [o.content for o in out if isinstance(o, Completion)] == ["a", "b"]
    assert sum(o.completion_tokens for o in out if isinstance(o, Completion)) == 4


# --------------------------------------------------------------------------- the deadline


async def test_a_trickling_upstream_is_cut_by_the_call_deadline_not_multiplied() -> None:
    """1 byte per 50 ms, 0.2 s per attempt: without a deadline, 4 attempts x 3 split levels."""
    params = SamplingParams(max_tokens=16, timeout=0.2)
    async with hostile(drip_interval=0.05) as (server, client):
        outcomes = await client.complete_each(ask("slow_body"), n=4, params=params)
    failures = errors(outcomes)
    assert {e.kind for e in failures} == {"timeout"}
    assert all(not e.retryable for e in failures)
    assert "call deadline of 0.8s reached" in str(failures[0])
    assert server.attacks_sent["slow_body"] <= FAST.max_attempts  # no n-split after it


async def test_an_explicit_call_deadline_bounds_a_trickling_stream() -> None:
    params = SamplingParams(max_tokens=16, timeout=0.2)
    retry = RetryPolicy(max_attempts=20, initial_backoff=0.001, max_backoff=0.01, deadline=0.5)
    async with hostile(drip_interval=0.05, retry=retry) as (server, client):
        got = [o async for o in client.stream_each(ask("sse_slow"), n=2, params=params)]
    assert {e.kind for e in errors([o for _, o in got])} == {"timeout"}
    assert server.attacks_sent["sse_slow"] <= 3  # 0.5 s of 0.2 s attempts, not 20


# --------------------------------------------------------------------------- replicas


async def test_replica_errors_name_their_replica_by_index() -> None:
    async with HostileServer(attack="index_string") as bad, HostileServer() as good:
        client = MultiEndpointClient([good.base_url, bad.base_url], "m", retry=FAST)
        try:
            seen: dict[int | None, str] = {}
            for q in range(4):  # least-outstanding rotation reaches both replicas
                prompt = [{"role": "user", "content": f"q{q}"}]
                for outcome in await client.complete_each(prompt, n=1, params=SMALL):
                    if isinstance(outcome, ModelCallError):
                        seen[outcome.upstream] = outcome.public_message()
        finally:
            await client.aclose()
    assert seen == {1: "upstream 1 call failed: malformed reply"}
    assert all(r.healthy for r in client.stats())  # a bad answer does not eject the replica


# --------------------------------------------------------------------------- LangChain client


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


async def test_the_call_deadline_spans_replicas() -> None:
    """Two trickling replicas, 0.2 s attempts, 4 attempts: 0.8 s in all.

    On each replica the n=2 request times out and is split into two singles
    (0.4 s per replica), so two replicas spend the deadline: 6 requests at
    most, where 4 full attempts (each n=2 then two singles) made 12.
    """
    params = SamplingParams(max_tokens=16, timeout=0.2)
    async with (
        HostileServer(attack="slow_body", drip_interval=0.05) as one,
        HostileServer(attack="slow_body", drip_interval=0.05) as two,
    ):
        client = MultiEndpointClient([one.base_url, two.base_url], "m", retry=FAST)
        try:
            outcomes = await client.complete_each(ask("slow_body"), n=2, params=params)
        finally:
            await client.aclose()
        sent = one.attacks_sent.get("slow_body", 0) + two.attacks_sent.get("slow_body", 0)
    failures = errors(outcomes)
    assert {e.kind for e in failures} == {"timeout"}
    assert {e.upstream for e in failures} <= {0, 1}
    assert "call deadline of 0.8s reached" in str(failures[0])
    assert sent <= 6


async def test_transport_and_timeout_failures_have_their_kind() -> None:
    refused = OpenAICompatClient("http://127.0.0.1:9/v1", "m", retry=RetryPolicy(max_attempts=1))
    (error,) = errors(await refused.complete_each(ask("slow_body"), n=1, params=SMALL))
    await refused.aclose()
    assert error.kind == "transport"
    assert error.public_message() == "the upstream call failed: connection failed"
    params = SamplingParams(max_tokens=16, timeout=0.1)
    one = RetryPolicy(max_attempts=1)
    async with hostile(drip_interval=0.05, retry=one) as (_server, client):
        (error,) = errors(await client.complete_each(ask("slow_body"), n=1, params=params))
    assert error.kind == "timeout"


async def test_a_replica_stream_error_names_its_replica() -> None:
    async def ignore(kind: str, text: str) -> None:
        return None

    async with HostileServer(attack="sse_content_not_string") as bad:
        client = MultiEndpointClient([bad.base_url], "m", retry=FAST)
        try:
            with pytest.raises(ModelCallError) as caught:
                await client.stream(ask("sse_content_not_string"), params=SMALL, on_delta=ignore)
        finally:
            await client.aclose()
    assert caught.value.kind == "malformed" and caught.value.upstream == 0
    assert caught.value.public_message() == "upstream 0 call failed: malformed reply"
