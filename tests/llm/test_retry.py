"""The one retry rule: backoff with jitter, the server's Retry-After, the deadline, giving up.

The policy's arithmetic is checked against bounds derived from the policy
itself; :func:`next_attempt` and :func:`call_with_retry` are driven by an
attempt function that fails by its attempt number, with zero backoff, so
nothing waits; then real HTTP shows a ``Retry-After`` honoured (by what it
caused: how many requests the server saw).
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from pacore_graph.errors import ModelCallError, UpstreamStatusError, UpstreamTransportError
from pacore_graph.llm.call_deadline import CallDeadline
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.llm.retry import asked_wait, call_with_retry, next_attempt
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing import ScriptedServer

PARAMS = SamplingParams()
NO_WAIT = ModelRetryPolicy(max_attempts=3, initial_backoff=0.0, max_backoff=0.0, jitter=0.0)
LONG = CallDeadline.start(3600.0)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


@asynccontextmanager
async def direct(url: str, retry: ModelRetryPolicy) -> AsyncIterator[OpenAICompatClient]:
    client = OpenAICompatClient(url, "scripted", retry=retry)
    try:
        yield client
    finally:
        await client.aclose()


def busy(retry_after: float | None = None) -> ModelCallError:
    return UpstreamStatusError("HTTP 503 from u: busy", status=503, retryable=True,
                               retry_after=retry_after)  # fmt: skip


# --------------------------------------------------------------------------- the policy


@pytest.mark.parametrize("attempt", [1, 2, 3, 6])
def test_backoff_is_jittered_within_bounds_derived_from_the_policy(attempt: int) -> None:
    policy = ModelRetryPolicy(initial_backoff=1.0, max_backoff=8.0, multiplier=2.0, jitter=0.5)
    base = policy.backoff(attempt)
    grown = policy.initial_backoff * policy.multiplier ** (attempt - 1)
    assert base == min(policy.max_backoff, grown)
    rng = random.Random(attempt)
    delays = [policy.delay(attempt, rng=rng) for _ in range(200)]
    assert all((1 - policy.jitter) * base <= d <= base for d in delays)
    assert len({round(d, 6) for d in delays}) > 150, "retries must not come back in lockstep"


def test_backoff_is_jittered_and_bounded() -> None:
    policy = ModelRetryPolicy(initial_backoff=1.0, max_backoff=8.0, jitter=0.5)
    rng = random.Random(0)
    base = policy.backoff(2)
    delays = [policy.delay(2, rng=rng) for _ in range(200)]
    assert all((1 - policy.jitter) * base <= d <= base for d in delays)
    assert len({round(d, 6) for d in delays}) > 150, "retries must not come back in lockstep"
    retry_after = 3.0
    after = [policy.delay(1, retry_after=retry_after, rng=rng) for _ in range(50)]
    top = retry_after + policy.jitter * policy.backoff(1)
    assert all(retry_after <= d <= top for d in after) and len(set(after)) > 1
    assert ModelRetryPolicy(jitter=0.0).delay(3) == ModelRetryPolicy().backoff(3)
    ceiling = policy.max_retry_after + policy.jitter * policy.backoff(1)
    assert policy.delay(1, retry_after=1e6) <= ceiling


@pytest.mark.parametrize("asked", [1e6, 3601.0])
def test_retry_after_is_capped_at_the_policys_longest(asked: float) -> None:
    policy = ModelRetryPolicy(max_retry_after=30.0, jitter=0.5)
    rng = random.Random(1)
    delays = [policy.delay(1, retry_after=asked, rng=rng) for _ in range(50)]
    ceiling = policy.max_retry_after + policy.jitter * policy.backoff(1)
    assert all(policy.max_retry_after <= d <= ceiling for d in delays)


# --------------------------------------------------------------------------- next_attempt


def test_a_retryable_error_gets_a_wait_and_its_attempt_count() -> None:
    policy = ModelRetryPolicy(max_attempts=3, initial_backoff=0.5, jitter=0.0)
    exc, wait = next_attempt(busy(), 1, policy, LONG, random.Random(0))
    assert wait == policy.backoff(1) and exc.attempts == 1


def test_the_servers_retry_after_is_the_wait() -> None:
    policy = ModelRetryPolicy(max_attempts=3, jitter=0.0)
    _, wait = next_attempt(busy(retry_after=2.0), 1, policy, LONG, random.Random(0))
    assert wait == 2.0


def test_only_a_status_error_asks_for_a_wait() -> None:
    """``Retry-After`` is a status error's field; any other failure backs off by the policy."""
    assert asked_wait(busy(retry_after=2.0)) == 2.0 and asked_wait(busy()) is None
    cut = UpstreamTransportError("cannot reach u", retryable=True)
    assert not hasattr(cut, "retry_after") and asked_wait(cut) is None
    policy = ModelRetryPolicy(max_attempts=3, jitter=0.0)
    assert next_attempt(cut, 1, policy, LONG, random.Random(0))[1] == policy.backoff(1)


def test_the_last_attempt_gives_up_saying_so() -> None:
    exc, wait = next_attempt(busy(), NO_WAIT.max_attempts, NO_WAIT, LONG, random.Random(0))
    assert wait is None and exc.attempts == NO_WAIT.max_attempts
    assert f"gave up after {NO_WAIT.max_attempts} attempts" in str(exc)
    quiet, _ = next_attempt(busy(), NO_WAIT.max_attempts, NO_WAIT, LONG, random.Random(0),
                            note_gave_up=False)  # fmt: skip
    assert "gave up" not in str(quiet)


def test_an_error_that_may_not_be_retried_is_final_at_once() -> None:
    not_retryable = UpstreamStatusError("HTTP 400 from u: bad", status=400, retryable=False)
    assert next_attempt(not_retryable, 1, NO_WAIT, LONG, random.Random(0))[1] is None
    assert next_attempt(busy(), 1, NO_WAIT, LONG, random.Random(0), may_retry=False)[1] is None


def test_a_wait_past_the_deadline_gives_up_as_final() -> None:
    """The server asks for longer than the call has left: not waited for, not retried above."""
    deadline = CallDeadline.start(60.0)
    policy = ModelRetryPolicy(max_attempts=5, max_retry_after=3600.0, jitter=0.0)
    exc, wait = next_attempt(busy(retry_after=3600.0), 1, policy, deadline, random.Random(0))
    assert wait is None and not exc.retryable
    assert f"call deadline of {deadline.seconds:g}s reached" in str(exc)


# --------------------------------------------------------------------------- call_with_retry


async def test_call_with_retry_tries_until_success_with_its_timeout() -> None:
    seen: list[float] = []

    async def attempt_once(timeout: float) -> str:
        seen.append(timeout)
        if len(seen) < NO_WAIT.max_attempts:
            raise busy()
        return "ok"

    got = await call_with_retry(attempt_once, timeout=7.0, policy=NO_WAIT, deadline=LONG,
                                rng=random.Random(0))  # fmt: skip
    assert got == "ok" and seen == [7.0] * NO_WAIT.max_attempts


async def test_call_with_retry_raises_the_last_error_when_spent() -> None:
    calls = 0

    async def attempt_once(timeout: float) -> str:
        nonlocal calls
        calls += 1
        raise busy()

    with pytest.raises(ModelCallError, match="gave up after") as caught:
        await call_with_retry(attempt_once, timeout=1.0, policy=NO_WAIT, deadline=LONG,
                              rng=random.Random(0))  # fmt: skip
    assert calls == NO_WAIT.max_attempts and caught.value.attempts == calls


async def test_call_with_retry_does_not_retry_once_told_not_to() -> None:
    calls = 0

    async def attempt_once(timeout: float) -> str:
        nonlocal calls
        calls += 1
        raise busy()

    with pytest.raises(ModelCallError):
        await call_with_retry(attempt_once, timeout=1.0, policy=NO_WAIT, deadline=LONG,
                              rng=random.Random(0), may_retry=lambda: False)  # fmt: skip
    assert calls == 1


async def test_call_with_retry_starts_nothing_past_the_deadline() -> None:
    calls = 0

    async def attempt_once(timeout: float) -> str:
        nonlocal calls
        calls += 1
        return "never"

    spent = CallDeadline(LONG.at - 7200.0, 5.0)  # ended an hour ago
    with pytest.raises(ModelCallError) as caught:
        await call_with_retry(attempt_once, timeout=1.0, policy=NO_WAIT, deadline=spent,
                              rng=random.Random(0))  # fmt: skip
    assert calls == 0 and caught.value.kind == "timeout"


# --------------------------------------------------------------------------- over HTTP


async def test_retry_after_is_honoured() -> None:
    # The server asks for 30 s; the call may take 5 s in all. A client that
    # honours Retry-After cannot wait that long and gives up after one request;
    # one that used its own 1 ms backoff instead would retry and succeed.
    policy = ModelRetryPolicy(max_attempts=2, initial_backoff=0.001, max_backoff=0.001, deadline=5)
    async with (
        ScriptedServer(fail_first=1, failure_status=429, retry_after=30) as srv,
        direct(srv.base_url, policy) as client,
    ):
        with pytest.raises(ModelCallError, match="call deadline of 5s reached") as caught:
            await client.complete(user("Q"), params=PARAMS)
    assert caught.value.status == 429
    assert [r.status for r in srv.requests] == [429]  # no retry before the server's time


async def test_a_short_retry_after_is_waited_out_and_retried() -> None:
    policy = ModelRetryPolicy(max_attempts=2, initial_backoff=0.001, max_backoff=0.001, deadline=60)
    async with (
        ScriptedServer(fail_first=1, failure_status=429, retry_after=0.05) as srv,
        direct(srv.base_url, policy) as client,
    ):
        (out,) = await client.complete(user("Q"), params=PARAMS)
    assert out.content
    assert [r.status for r in srv.requests] == [429, 200]
