"""The exceptions a user can act on, in one place."""

from __future__ import annotations

__all__ = [
    "ERROR_KINDS",
    "ModelCallError",
    "PaCoReError",
    "RoundFailedError",
]


class PaCoReError(RuntimeError):
    """Base class of pacore-graph's own errors."""


class ModelCallError(PaCoReError):
    """A chat call failed for good (after retries, or with a non-retryable answer).

    ``status`` is the HTTP status when there was one; ``retryable`` says whether
    the failure was of a kind that retries are for (429, 5xx, connection, timeout);
    ``retry_after`` is the wait in seconds the server asked for (``Retry-After``).
    ``server_wide`` marks failures of the server as a whole (unreachable,
    429/503 overload): asking again in smaller requests would only add load.

    The message is for the operator (it may name the upstream URL and quote a
    little of its body). What may leave the process, to a client of ``pacore
    serve``, is :meth:`public_message`: built from ``kind`` (a low-cardinality
    cause, see :data:`ERROR_KINDS`), ``status`` and ``upstream`` (the replica's
    index behind a multi-endpoint client) only, never from upstream text.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        retryable: bool = False,
        attempts: int = 1,
        retry_after: float | None = None,
        server_wide: bool = False,
        kind: str | None = None,
        upstream: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.attempts = attempts
        self.retry_after = retry_after
        self.server_wide = server_wide
        self.kind = kind if kind is not None else ("status" if status is not None else "other")
        self.upstream = upstream

    def public_message(self) -> str:
        """A one-line cause safe to send to a client: no URL, no upstream body."""
        where = "the upstream" if self.upstream is None else f"upstream {self.upstream}"
        if self.kind == "status" and self.status is not None:
            return f"{where} answered HTTP {self.status}"
        return f"{where} call failed: {ERROR_KINDS.get(self.kind, 'error')}"


#: The causes a :class:`ModelCallError` names in ``kind`` (low-cardinality, for
#: metrics, span ``error.type`` and client-facing messages), with their wording.
ERROR_KINDS: dict[str, str] = {
    "status": "non-success HTTP status",
    "transport": "connection failed",
    "timeout": "timed out",
    "no_content": "reply had no content",
    "malformed": "malformed reply",
    "response_too_large": "response too large",
    "other": "error",
}


class RoundFailedError(PaCoReError):
    """Every explorer call of a round failed, so there is nothing to synthesise from.

    ``errors`` are the trajectories' error texts, for the operator: they may
    name upstream URLs and quote upstream bodies. What may reach a client is
    :meth:`public_message`, built from the round index and the count only.
    """

    def __init__(self, message: str, *, round_index: int, errors: list[str]) -> None:
        super().__init__(message)
        self.round_index = round_index
        self.errors = errors

    def public_message(self) -> str:
        """A one-line cause safe to send to a client: no URL, no upstream text."""
        return (
            f"round {self.round_index}: all {len(self.errors)} explorer calls to the upstream "
            "model failed (the server log has the causes)"
        )
