"""The exceptions a user can act on, in one place."""

from __future__ import annotations

__all__ = [
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
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.attempts = attempts
        self.retry_after = retry_after
        self.server_wide = server_wide


class RoundFailedError(PaCoReError):
    """Every explorer call of a round failed, so there is nothing to synthesise from."""

    def __init__(self, message: str, *, round_index: int, errors: list[str]) -> None:
        super().__init__(message)
        self.round_index = round_index
        self.errors = errors
