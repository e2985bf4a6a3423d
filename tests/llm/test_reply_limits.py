"""Reading an answer under a cap derived from its request (issue 18, part 3).

The cap's arithmetic, then the direct client against a hostile upstream over
real HTTP on loopback (:mod:`pacore_graph.testing.hostile_upstream`): huge
bodies, error bodies and event streams fail as ``response_too_large``
without being read to the end. Assertions are on what the limits caused
(error kinds, request counters, whether the server got to write its body to
the end), never on wall time. Answers of the wrong shape:
``test_reply_checks.py``; a trickling upstream: ``test_call_deadline.py``.
"""

from __future__ import annotations

import json

import pytest
from hostile_support import HUGE, SMALL, ask, errors, hostile

from pacore_graph.errors import ModelCallError
from pacore_graph.llm.reply_limits import (
    CAP_CEILING,
    EVENT_BYTES_PER_TOKEN,
    LOGPROB_BYTES_PER_ENTRY,
    PROMPT_ECHO_FACTOR,
    SLACK_BYTES,
    TEXT_BYTES_PER_TOKEN,
    UNSET_MAX_TOKENS,
    reply_cap,
)
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.values.records import Completion

# --------------------------------------------------------------------------- the cap


def test_the_cap_grows_with_max_tokens_n_logprobs_and_streaming() -> None:
    tokens, n, top, request_bytes = 100, 4, 20, 1000
    base = {"messages": [], "max_tokens": tokens}
    plain = reply_cap(base, request_bytes=0)
    assert plain == SLACK_BYTES + tokens * TEXT_BYTES_PER_TOKEN
    assert reply_cap({**base, "n": n}, request_bytes=0) - SLACK_BYTES == n * (plain - SLACK_BYTES)
    with_logprobs = reply_cap({**base, "logprobs": True, "top_logprobs": top}, request_bytes=0)
    per_token = TEXT_BYTES_PER_TOKEN + LOGPROB_BYTES_PER_ENTRY * (1 + top)
    assert with_logprobs - SLACK_BYTES == tokens * per_token
    streamed = reply_cap(base, request_bytes=0, streamed=True)
    assert streamed - plain == tokens * EVENT_BYTES_PER_TOKEN
    echoed = reply_cap(base, request_bytes=request_bytes)
    assert echoed == plain + PROMPT_ECHO_FACTOR * request_bytes
    unset = reply_cap({"messages": []}, request_bytes=0)
    assert unset == SLACK_BYTES + UNSET_MAX_TOKENS * TEXT_BYTES_PER_TOKEN
    # max_completion_tokens is read like max_tokens, and wins over it
    assert reply_cap({"max_completion_tokens": tokens, "max_tokens": 1}, request_bytes=0) == plain


def test_the_cap_never_passes_its_ceiling() -> None:
    request = {"n": 128, "max_tokens": 1 << 20, "logprobs": True, "top_logprobs": 20}
    assert reply_cap(request, request_bytes=1 << 30, streamed=True) == CAP_CEILING


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
        one = ModelRetryPolicy(max_attempts=1)
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
