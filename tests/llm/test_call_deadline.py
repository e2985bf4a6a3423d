"""One model call's total deadline, across attempts, backoffs and ``n``-splits.

:class:`CallDeadline` on its own is checked with deadlines placed in the past
or far in the future (never by waiting); then a trickling upstream over real
HTTP, where the assertions are on what the deadline caused: the error kind,
that it is final, and how many requests the server saw.
"""

from __future__ import annotations

import time

from hostile_support import FAST, ask, errors, hostile

from pacore_graph.errors import UpstreamStatusError
from pacore_graph.llm.call_deadline import CallDeadline
from pacore_graph.llm.multi_client import MultiEndpointClient
from pacore_graph.settings.config import ModelRetryPolicy, SamplingParams
from pacore_graph.testing.hostile_upstream import HostileServer

FAR = 3600.0


def passed(seconds: float = 5.0) -> CallDeadline:
    """A deadline of ``seconds`` that ended a minute ago."""
    return CallDeadline(time.monotonic() - 60.0, seconds)


def test_a_fresh_deadline_allows_an_attempt_and_caps_its_timeout() -> None:
    deadline = CallDeadline.start(FAR)
    assert deadline.seconds == FAR and deadline.allows()
    assert deadline.attempt_timeout(1.0) == 1.0  # the per-attempt timeout when less is left
    assert deadline.attempt_timeout(2 * FAR) <= FAR  # what is left when that is less
    assert not deadline.allows(2 * FAR)  # a wait past the deadline is refused


def test_a_passed_deadline_allows_nothing() -> None:
    deadline = passed()
    assert deadline.remaining() < 0 and not deadline.allows() and not deadline.allows(0.0)


def test_expire_marks_the_error_final_and_leaves_the_original_alone() -> None:
    deadline = passed(seconds=2.5)
    original = UpstreamStatusError(
        "HTTP 503 from u: busy", status=503, retryable=True, server_wide=True
    )
    final = deadline.expire(original)
    assert not final.retryable and not final.server_wide
    assert isinstance(final, UpstreamStatusError) and final.status == 503
    assert f"call deadline of {deadline.seconds:g}s reached" in str(final)
    assert original.retryable and original.server_wide  # untouched
    fresh = deadline.expire()
    assert fresh.kind == "timeout" and not fresh.retryable
    assert f"{deadline.seconds:g}s" in str(fresh)


async def test_a_trickling_upstream_is_cut_by_the_call_deadline_not_multiplied() -> None:
    """1 byte per 50 ms, 0.2 s per attempt: without a deadline, 4 attempts x 3 split levels."""
    params = SamplingParams(max_tokens=16, timeout=0.2)
    async with hostile(drip_interval=0.05) as (server, client):
        outcomes = await client.complete_each(ask("slow_body"), n=4, params=params)
    failures = errors(outcomes)
    assert {e.kind for e in failures} == {"timeout"}
    assert all(not e.retryable for e in failures)
    assert f"call deadline of {FAST.call_seconds(params.timeout):g}s reached" in str(failures[0])
    assert server.attacks_sent["slow_body"] <= FAST.max_attempts  # no n-split after it


async def test_an_explicit_call_deadline_bounds_a_trickling_stream() -> None:
    params = SamplingParams(max_tokens=16, timeout=0.2)
    retry = ModelRetryPolicy(max_attempts=20, initial_backoff=0.001, max_backoff=0.01, deadline=0.5)
    async with hostile(drip_interval=0.05, retry=retry) as (server, client):
        got = [o async for o in client.stream_each(ask("sse_slow"), n=2, params=params)]
    assert {e.kind for e in errors([o for _, o in got])} == {"timeout"}
    assert server.attacks_sent["sse_slow"] <= 3  # 0.5 s of 0.2 s attempts, not 20


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
    assert f"call deadline of {FAST.call_seconds(params.timeout):g}s reached" in str(failures[0])
    assert sent <= 6
