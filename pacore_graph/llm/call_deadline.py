"""One model call's total deadline, across its attempts, backoffs and ``n``-splits.

Why: ``--timeout`` is per HTTP attempt, as in the openai SDK, but a call is
more than one attempt. It is retried (``--retries``), and an ``n=K`` request
that failed is asked again in two halves, down to single samples, each with
its own retries: against an upstream that trickles one byte a second the
attempts and splits multiplied, and a run waited far past anything the
timeout suggested. A :class:`CallDeadline` is started once per call
(``ModelRetryPolicy.call_seconds``: ``--call-deadline``, by default ``timeout x
retries``) and shared by everything that call does: each attempt gets
``min(timeout, time left)``, no retry or split starts once it has passed,
and the call then fails as ``kind="timeout"``, not retryable (so nothing
above it splits or retries it again).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pacore_graph.errors import ModelCallError, UpstreamTimeoutError

__all__ = ["CallDeadline"]


@dataclass(frozen=True, slots=True)
class CallDeadline:
    """The moment (``time.monotonic``) a call must be over by, and its length."""

    at: float
    seconds: float

    @classmethod
    def start(cls, seconds: float) -> CallDeadline:
        """A deadline ``seconds`` from now."""
        return cls(time.monotonic() + seconds, seconds)

    def remaining(self) -> float:
        """Seconds left (negative once passed)."""
        return self.at - time.monotonic()

    def attempt_timeout(self, timeout: float) -> float:
        """The timeout of the next attempt: the per-attempt one, or what is left if less."""
        return max(0.001, min(timeout, self.remaining()))

    def allows(self, wait: float = 0.0) -> bool:
        """Whether another attempt can still start after waiting ``wait`` seconds."""
        return self.remaining() - wait > 0.0

    def expire(self, exc: ModelCallError | None = None) -> ModelCallError:
        """The call's final error once the deadline is spent: ``exc`` marked final, or a new one.

        The copy is neither retryable nor server-wide: nothing above may retry
        or split it past the deadline. ``exc`` itself is left as it was.
        """
        note = f"call deadline of {self.seconds:g}s reached"
        if exc is None:
            return UpstreamTimeoutError(note)
        return exc.as_final(note)
