"""The exceptions a user can act on, in one place.

Every error class of the package derives from :class:`PaCoReError`, a plain
``Exception`` (``tests/test_pacore_graph_errors.py`` walks the modules to
hold that), so ``except PaCoReError`` catches everything pacore-graph raises
on purpose. A builtin second base is kept only where callers catch the class
as that builtin: :class:`~pacore_graph.rl.RLDependencyError` is an
``ImportError`` (how a missing optional dependency is caught) and
:class:`~pacore_graph.settings.per_run.SettingsError` a ``ValueError`` (what
LangGraph's API server passes on to its client).

A failed model call is a small tree, modelled on httpx's exceptions: callers
catch the branch they can handle (a status they can back off on, a transport
failure, a reply with no content) and ``except ModelCallError`` still catches
them all. Each class is one ``kind`` (a low-cardinality cause for metrics,
span ``error.type`` and client-facing messages: :data:`ERROR_KINDS`) and
carries only the fields that apply to it (besides ``attempts`` and
``upstream``, set on copies; ``retryable`` and ``server_wide`` are ``False``
for a class that does not take them)::

    ModelCallError                 kind "other" (a client's own failure)
    ├── UpstreamStatusError        "status": status, retry_after, retryable, server_wide
    ├── UpstreamTransportError     "transport": retryable, server_wide
    │   └── UpstreamTimeoutError   "timeout"
    ├── UpstreamStreamError        "stream_error": an error event mid-stream; retryable
    ├── NoContentError             "no_content": a choice with ``content: null``
    ├── MalformedReplyError        "malformed": not of the protocol's shape
    ├── ResponseTooLargeError      "response_too_large"
    └── InvalidPromptError         "invalid_prompt": our prompt, never sent

Model-call errors are immutable once built: several samples share one error
object (a failed ``n``-sample request), so a retry loop that wants to say
how many attempts were made, or a multi-endpoint client that names the
replica, builds a copy (:meth:`ModelCallError.replace`,
:meth:`~ModelCallError.with_attempts`, :meth:`~ModelCallError.as_final`)
instead of patching an error that other samples hold.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

__all__ = [
    "ERROR_KINDS",
    "InvalidPromptError",
    "MalformedReplyError",
    "ModelCallError",
    "NoContentError",
    "PaCoReError",
    "ResponseTooLargeError",
    "RoundFailedError",
    "UpstreamStatusError",
    "UpstreamStreamError",
    "UpstreamTimeoutError",
    "UpstreamTransportError",
]


def _rebuild(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    """An instance of ``cls`` with ``args`` and attributes ``state``, its ``__init__`` not run."""
    new = cls.__new__(cls, *args)
    vars(new).update(state)
    return new


class PaCoReError(Exception):
    """Base class of pacore-graph's own errors.

    Pickles (for Ray, multiprocessing) as its arguments and attributes: the
    default calls the constructor with the message alone, which fails for
    any error whose constructor takes more.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, dict(vars(self))))


class ModelCallError(PaCoReError):
    """A chat call failed for good (after retries, or with a non-retryable answer).

    The message is for the operator (it may name the upstream URL and quote a
    little of its body). What may leave the process, to a client of ``pacore
    serve``, is :meth:`public_message`: built from the class (its ``kind``),
    the status and ``upstream`` only, never from upstream text.
    """

    kind: ClassVar[str] = "other"
    """The low-cardinality cause this class stands for (a key of :data:`ERROR_KINDS`)."""
    kind_text: ClassVar[str] = "error"
    """How :meth:`public_message` words the cause."""

    retryable: bool = False
    """Whether retries are for this failure (429, 5xx, connection, timeout)."""
    server_wide: bool = False
    """The server as a whole failed (down, overloaded): smaller requests would not help."""
    attempts: int
    """How many attempts the call made before giving up with this error."""
    upstream: int | None
    """The replica's index behind a multi-endpoint client, if any."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self._set(attempts=1, upstream=None)

    def _set(self, **fields: Any) -> None:
        vars(self).update(fields)

    def __setattr__(self, name: str, value: Any) -> None:
        self._may_change(name)
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        self._may_change(name)
        super().__delattr__(name)

    def _may_change(self, name: str) -> None:
        # Python itself sets dunders (__traceback__, __cause__, __notes__): let it.
        if not name.startswith("__") or name == "__dict__":
            raise AttributeError(
                f"{type(self).__name__} is immutable: build a copy (replace, with_attempts,"
                f" as_final) instead of changing {name!r}"
            )

    @property
    def message(self) -> str:
        """The operator's message (may name the URL and quote upstream text)."""
        return str(self.args[0]) if self.args else self.kind

    def replace(self, *, message: str | None = None, **changes: Any) -> Self:
        """A copy with ``changes`` to its fields (and ``message``); the cause is kept.

        Only fields this error carries can change: a ``TypeError`` names any
        other (a :class:`NoContentError` has no ``status``, and is never
        retryable).
        """
        state = vars(self)
        unknown = sorted(name for name in changes if name not in state or name.startswith("_"))
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {', '.join(unknown)}")
        text = self.message if message is None else message
        new: Self = _rebuild(type(self), (text,), state | changes)
        new.__cause__ = self.__cause__
        new.__suppress_context__ = self.__suppress_context__
        return new

    def with_attempts(self, attempts: int, *, gave_up: str | None = None) -> Self:
        """A copy that says ``attempts`` were made; ``gave_up`` is appended to the message.

        ``gave_up`` is e.g. ``"gave up after 3 attempts"``; it replaces any
        such note already there, so a wrapper's fuller count is not doubled.
        """
        if gave_up is None:
            return self.replace(attempts=attempts)
        text = self.message
        mark = text.rfind(" (gave up after ")
        if mark >= 0 and text.endswith(")"):
            text = text[:mark]
        return self.replace(message=f"{text} ({gave_up})", attempts=attempts)

    def as_final(self, note: str) -> Self:
        """A copy nothing may retry or split any more, ``note`` appended once (a deadline)."""
        text = self.message
        if note not in text:
            text = f"{text} ({note})"
        final = {name: False for name in ("retryable", "server_wide") if name in vars(self)}
        return self.replace(message=text, **final)

    def public_message(self) -> str:
        """A one-line cause safe to send to a client: no URL, no upstream body."""
        return f"{self._where()} call failed: {self.kind_text}"

    def _where(self) -> str:
        return "the upstream" if self.upstream is None else f"upstream {self.upstream}"


class UpstreamStatusError(ModelCallError):
    """The server answered a non-success HTTP status (``status``; maybe ``retry_after``)."""

    kind = "status"
    kind_text = "non-success HTTP status"

    status: int
    """The HTTP status."""
    retry_after: float | None
    """The wait in seconds the server asked for (``Retry-After``), if any."""

    def __init__(
        self,
        message: str,
        *,
        status: int,
        retryable: bool = False,
        retry_after: float | None = None,
        server_wide: bool = False,
    ) -> None:
        super().__init__(message)
        self._set(
            status=status, retryable=retryable, retry_after=retry_after, server_wide=server_wide
        )

    def public_message(self) -> str:
        return f"{self._where()} answered HTTP {self.status}"


class UpstreamTransportError(ModelCallError):
    """The connection failed, was refused or was cut before the reply was whole."""

    kind = "transport"
    kind_text = "connection failed"

    def __init__(self, message: str, *, retryable: bool = False, server_wide: bool = False) -> None:
        super().__init__(message)
        self._set(retryable=retryable, server_wide=server_wide)


class UpstreamTimeoutError(UpstreamTransportError):
    """An attempt, or the whole call (its deadline), ran out of time."""

    kind = "timeout"
    kind_text = "timed out"


class UpstreamStreamError(ModelCallError):
    """The server sent an error event after the stream began, with no HTTP status.

    (vLLM's ``{"error": {...}}`` when generation fails mid-way; one that names a
    status is an :class:`UpstreamStatusError`.)
    """

    kind = "stream_error"
    kind_text = "server reported an error mid-stream"

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self._set(retryable=retryable)


class NoContentError(ModelCallError):
    """A choice came back with no content (e.g. a reasoning model cut while thinking)."""

    kind = "no_content"
    kind_text = "reply had no content"


class MalformedReplyError(ModelCallError):
    """The reply was not of the protocol's shape (not JSON, wrong types, stray choices)."""

    kind = "malformed"
    kind_text = "malformed reply"


class ResponseTooLargeError(ModelCallError):
    """The reply exceeded the most the request could need: read no further."""

    kind = "response_too_large"
    kind_text = "response too large"


class InvalidPromptError(ModelCallError):
    """The prompt cannot be sent (not valid Unicode text): our input, not the upstream's fault."""

    kind = "invalid_prompt"
    kind_text = "the prompt is not valid text"


def _kinds(root: type[ModelCallError]) -> dict[str, str]:
    found = {root.kind: root.kind_text}
    for sub in root.__subclasses__():
        found |= _kinds(sub)
    return found


#: The causes a :class:`ModelCallError` names in ``kind``, one per class of the
#: tree above, with their wording (for metrics, span ``error.type`` and
#: client-facing messages).
ERROR_KINDS: dict[str, str] = _kinds(ModelCallError)


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
