"""The exceptions a user can act on, in one place.

Every error class of the package derives from :class:`PaCoReError`
(``tests/test_pacore_graph_errors.py`` walks the modules to hold that), so ``except
PaCoReError`` catches everything pacore-graph raises on purpose. A class that
callers also catch as a builtin (``ValueError``, ``OSError``) keeps that as a
second base.

A failed model call is a small tree, modelled on httpx's exceptions: callers
catch the branch they can handle (a status they can back off on, a transport
failure, a reply with no content) and ``except ModelCallError`` still catches
them all::

    ModelCallError
    ├── UpstreamStatusError        a non-success HTTP status (status, retry_after)
    ├── UpstreamTransportError     the connection failed or was cut
    │   └── UpstreamTimeoutError   an attempt or the whole call ran out of time
    ├── NoContentError             a choice came back with ``content: null``
    ├── MalformedReplyError        the reply was not of the protocol's shape
    └── ResponseTooLargeError      the reply exceeded what the request could need

Errors are immutable once built: a retry loop that wants to say how many
attempts were made, or a multi-endpoint client that wants to name the replica,
builds a copy (:meth:`ModelCallError.with_attempts`,
:meth:`~ModelCallError.with_upstream`, :meth:`~ModelCallError.as_final`)
instead of patching an error that other samples may share.
"""

from __future__ import annotations

from typing import Any, Self

__all__ = [
    "ERROR_KINDS",
    "MalformedReplyError",
    "ModelCallError",
    "NoContentError",
    "PaCoReError",
    "ResponseTooLargeError",
    "RoundFailedError",
    "UpstreamStatusError",
    "UpstreamTimeoutError",
    "UpstreamTransportError",
]


class PaCoReError(RuntimeError):
    """Base class of pacore-graph's own errors."""


#: The fields of a :class:`ModelCallError`, in constructor order.
_FIELDS = ("status", "retryable", "attempts", "retry_after", "server_wide", "kind", "upstream")


def _rebuild(cls: type[ModelCallError], message: str, fields: dict[str, Any]) -> ModelCallError:
    """Unpickle a :class:`ModelCallError` (its ``__setattr__`` refuses the default way)."""
    return cls._build(message, fields)


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

    The attributes are read-only: see the module docstring for why and for
    the ``with_*`` copies that replace patching.
    """

    #: The ``kind`` a class stands for when the constructor is not told one.
    default_kind = "other"

    _fields: dict[str, Any]

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
        if kind is None:
            kind = "status" if status is not None else type(self).default_kind
        super().__init__(message)
        object.__setattr__(
            self,
            "_fields",
            {
                "status": status,
                "retryable": retryable,
                "attempts": attempts,
                "retry_after": retry_after,
                "server_wide": server_wide,
                "kind": kind,
                "upstream": upstream,
            },
        )

    @classmethod
    def _build(cls, message: str, fields: dict[str, Any]) -> Self:
        """An instance with exactly ``fields``, bypassing subclass constructors' defaults."""
        new = cls.__new__(cls, message)
        BaseException.__init__(new, message)
        object.__setattr__(new, "_fields", dict(fields))
        return new

    def __setattr__(self, name: str, value: Any) -> None:
        # Python itself sets dunders (__traceback__, __cause__, __notes__): let it.
        if name.startswith("__") and name != "__dict__":
            object.__setattr__(self, name, value)
            return
        raise AttributeError(
            f"{type(self).__name__} is immutable: build a copy (with_attempts, with_upstream,"
            f" as_final) instead of setting {name!r}"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, dict(self._fields)))

    @property
    def message(self) -> str:
        """The operator's message (may name the URL and quote upstream text)."""
        return str(self.args[0]) if self.args else self.kind

    @property
    def status(self) -> int | None:
        """The HTTP status, when there was one."""
        value: int | None = self._fields["status"]
        return value

    @property
    def retryable(self) -> bool:
        """Whether retries are for this failure (429, 5xx, connection, timeout)."""
        return bool(self._fields["retryable"])

    @property
    def attempts(self) -> int:
        """How many attempts the call made before giving up with this error."""
        return int(self._fields["attempts"])

    @property
    def retry_after(self) -> float | None:
        """The wait in seconds the server asked for (``Retry-After``), if any."""
        value: float | None = self._fields["retry_after"]
        return value

    @property
    def server_wide(self) -> bool:
        """The server as a whole failed (down, overloaded): smaller requests would not help."""
        return bool(self._fields["server_wide"])

    @property
    def kind(self) -> str:
        """A low-cardinality cause, one of :data:`ERROR_KINDS`."""
        return str(self._fields["kind"])

    @property
    def upstream(self) -> int | None:
        """The replica's index behind a multi-endpoint client, if any."""
        value: int | None = self._fields["upstream"]
        return value

    def _replace(self, message: str | None = None, **changes: Any) -> Self:
        """A copy with ``changes``; the copy keeps this error's cause and traceback."""
        unknown = set(changes) - set(_FIELDS)
        if unknown:
            raise TypeError(f"unknown ModelCallError fields: {sorted(unknown)}")
        new = self._build(self.message if message is None else message, self._fields | changes)
        new.__cause__ = self.__cause__
        new.__suppress_context__ = self.__suppress_context__
        return new

    def with_attempts(self, attempts: int, *, gave_up: str | None = None) -> Self:
        """A copy that says ``attempts`` were made; ``gave_up`` is appended to the message.

        ``gave_up`` is e.g. ``"gave up after 3 attempts"``; it replaces any
        such note already there, so a wrapper's fuller count is not doubled.
        """
        if gave_up is None:
            return self._replace(attempts=attempts)
        text = self.message
        mark = text.rfind(" (gave up after ")
        if mark >= 0 and text.endswith(")"):
            text = text[:mark]
        return self._replace(f"{text} ({gave_up})", attempts=attempts)

    def with_upstream(self, upstream: int) -> Self:
        """A copy naming the replica (its index) that failed."""
        return self._replace(upstream=upstream)

    def as_final(self, note: str) -> Self:
        """A copy nothing may retry or split any more, ``note`` appended once (a deadline)."""
        text = self.message
        if note not in text:
            text = f"{text} ({note})"
        return self._replace(text, retryable=False, server_wide=False)

    def public_message(self) -> str:
        """A one-line cause safe to send to a client: no URL, no upstream body."""
        where = "the upstream" if self.upstream is None else f"upstream {self.upstream}"
        if self.kind == "status" and self.status is not None:
            return f"{where} answered HTTP {self.status}"
        return f"{where} call failed: {ERROR_KINDS.get(self.kind, 'error')}"


class UpstreamStatusError(ModelCallError):
    """The server answered a non-success HTTP status (``status``; maybe ``retry_after``)."""

    default_kind = "status"


class UpstreamTransportError(ModelCallError):
    """The connection failed, was refused or was cut before the reply was whole."""

    default_kind = "transport"


class UpstreamTimeoutError(UpstreamTransportError):
    """An attempt, or the whole call (its deadline), ran out of time."""

    default_kind = "timeout"


class NoContentError(ModelCallError):
    """A choice came back with no content (e.g. a reasoning model cut while thinking)."""

    default_kind = "no_content"


class MalformedReplyError(ModelCallError):
    """The reply was not of the protocol's shape (not JSON, wrong types, stray choices)."""

    default_kind = "malformed"


class ResponseTooLargeError(ModelCallError):
    """The reply exceeded the most the request could need: read no further."""

    default_kind = "response_too_large"


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
