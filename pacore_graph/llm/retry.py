"""The one retry rule every model-call path follows.

After a failed attempt: wait an exponential backoff with random jitter (so a
burst of 429s does not come back in lockstep), or the server's
``Retry-After`` when it sent one; give up when the error is not retryable,
the attempts are spent, or the wait would pass the call's deadline (the
error then becomes final: nothing above may retry it). The JSON path, the
streamed paths and the multi-endpoint client all ask :func:`next_attempt`,
so they cannot drift apart.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

from pacore_graph.errors import ModelCallError, UpstreamStatusError
from pacore_graph.llm.call_deadline import CallDeadline
from pacore_graph.settings.config import ModelRetryPolicy

__all__ = ["asked_wait", "call_with_retry", "next_attempt"]

T = TypeVar("T")


def asked_wait(exc: ModelCallError) -> float | None:
    """The wait the server asked for (``Retry-After``), which only a status error carries."""
    return exc.retry_after if isinstance(exc, UpstreamStatusError) else None


def next_attempt(
    exc: ModelCallError,
    attempt: int,
    policy: ModelRetryPolicy,
    deadline: CallDeadline,
    rng: random.Random,
    *,
    may_retry: bool = True,
    note_gave_up: bool = True,
) -> tuple[ModelCallError, float | None]:
    """After attempt number ``attempt`` failed with ``exc``: the error, and the wait or None.

    The error returned is a copy saying how many attempts were made (and,
    with ``note_gave_up``, "gave up after N attempts" once retries are
    spent); ``None`` for the wait means give up with it. ``may_retry=False``
    is for a caller that already passed part of the answer on.
    """
    exc = exc.with_attempts(attempt)
    if not (may_retry and exc.retryable):
        return exc, None
    if attempt >= policy.max_attempts:
        if note_gave_up:
            exc = exc.with_attempts(attempt, gave_up=f"gave up after {attempt} attempts")
        return exc, None
    delay = policy.delay(attempt, retry_after=asked_wait(exc), rng=rng)
    if not deadline.allows(delay):
        return deadline.expire(exc), None
    return exc, delay


async def call_with_retry(
    attempt_once: Callable[[float], Awaitable[T]],
    *,
    timeout: float,
    policy: ModelRetryPolicy,
    deadline: CallDeadline,
    rng: random.Random,
    may_retry: Callable[[], bool] = lambda: True,
    note_gave_up: bool = True,
) -> T:
    """``attempt_once(timeout)`` until it succeeds or :func:`next_attempt` says give up.

    Each attempt's timeout is the per-attempt one, or what is left of the
    deadline if less. ``may_retry()`` is asked after a failure (a stream that
    already showed deltas may not be retried).
    """
    attempt = 0
    while True:
        attempt += 1
        if not deadline.allows():
            raise deadline.expire()
        try:
            return await attempt_once(deadline.attempt_timeout(timeout))
        except ModelCallError as caught:
            exc, delay = next_attempt(
                caught,
                attempt,
                policy,
                deadline,
                rng,
                may_retry=may_retry(),
                note_gave_up=note_gave_up,
            )
            if delay is None:
                raise exc from caught.__cause__
        await asyncio.sleep(delay)
