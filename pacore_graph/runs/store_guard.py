"""Checkpoint stores that fail a run cleanly: a bounded outage, then one line naming the store.

A dataset run writes to its checkpoint store on every step of every problem.
When the store goes away (PostgreSQL stopped, a disk full, a corrupt SQLite
file), letting each problem fail on its own leaves a run that either records
problems as failed for a reason that is not theirs, or waits without end for
a pool that never reconnects. So a store's failure is the *run's* failure:

- a store that can come back (PostgreSQL: a refused or lost connection, a
  pool timeout, an operation that does not answer) is retried for
  :data:`DEFAULT_STORE_RETRY_S` seconds from the first failure of the
  outage, across all operations; any success ends the outage. An outage
  shorter than that costs only the wait;
- when the outage outlasts it, or the failure cannot go away by waiting (a
  SQLite file that is corrupt or on a full disk), the operation raises
  :class:`StoreError`: one line naming the store (a URL without its
  password) and the way out. The fan-out stops every problem and the
  command exits; what was saved stays saved, so the same command resumes.
"""

from __future__ import annotations

import asyncio
import time
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver

from pacore_graph.errors import PaCoReError

__all__ = [
    "DEFAULT_STORE_RETRY_S",
    "StoreError",
    "StoreGuard",
    "guarded_saver_class",
    "redact_store",
]

#: How long an unreachable checkpoint store is waited for before the run fails
#: (``--checkpoint-timeout``). Long enough for a database restart or fail-over,
#: short enough that a store gone for good ends the run well inside a few minutes.
DEFAULT_STORE_RETRY_S = 60.0

#: How long the probe that names an outage's cause may take.
_PROBE_TIMEOUT_S = 15.0

#: The longest pause between two attempts during an outage.
_MAX_BACKOFF_S = 2.0

_T = TypeVar("_T")


class StoreError(PaCoReError):
    """The checkpoint store failed for good: the whole run stops (the same command resumes)."""


def redact_store(spec: str) -> str:
    """``spec`` fit to print: a URL's password (in its user part or query) replaced by ``***``."""
    if "://" not in spec:
        return spec
    try:
        parts = urllib.parse.urlsplit(spec)
        netloc = parts.netloc
        if parts.password is not None:
            user = parts.username or ""
            host = netloc.rpartition("@")[2]
            netloc = f"{user}:***@{host}"
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True)
        if any(key.lower() == "password" for key, _ in query):
            hidden = [(k, "***" if k.lower() == "password" else v) for k, v in query]
            parts = parts._replace(query=urllib.parse.urlencode(hidden, safe="*"))
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return spec.split("://", 1)[0] + "://***"


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0].strip() if text else ""
    return line or type(exc).__name__


class StoreGuard:
    """The outage policy of one store, shared by every operation on it.

    ``transient`` errors are retried while the outage (which starts at the
    first of them and ends at any success) is younger than ``retry_s``;
    ``fatal`` ones, and transient ones past that, raise :class:`StoreError`.
    ``attempt_timeout`` bounds each attempt (an operation on a store that
    stopped answering), counted as a transient failure.
    """

    def __init__(
        self,
        store: str,
        *,
        retry_s: float = DEFAULT_STORE_RETRY_S,
        transient: tuple[type[BaseException], ...] = (),
        fatal: tuple[type[BaseException], ...] = (),
        attempt_timeout: bool = False,
        probe: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        self.store = redact_store(store)
        self.retry_s = max(0.0, retry_s)
        self.transient = transient
        self.fatal = fatal
        self.attempt_timeout = attempt_timeout
        self.probe = probe
        """Asked once, when an outage ends the run, why the store cannot be reached
        (a pool only says it had no connection to give; a fresh connection says why)."""
        self.outage_since: float | None = None
        self.last_cause: str | None = None
        """The latest failure that said why (an attempt that timed out does not)."""
        self.retries = 0
        """Attempts that failed and were retried (over the store's lifetime)."""

    def failed(self, exc: BaseException, probed: str | None = None) -> StoreError:
        """The one-line error for a failure that ends the run.

        For an outage the cause is, by preference, what a fresh connection
        said (``probed``), else the last failure that said anything, else the
        failure at hand ("no answer" for an attempt that timed out).
        """
        if isinstance(exc, (TimeoutError, *self.transient)):
            what = f"unreachable for {self.retry_s:g} s" if self.retry_s else "unreachable"
            fallback = "no answer" if isinstance(exc, TimeoutError) else _reason(exc)
            cause = probed or self.last_cause or fallback
        else:
            what = "failed"
            cause = _reason(exc)
        return StoreError(
            f"checkpoint store {self.store} {what} ({cause}); the run stopped: "
            "run the same command again to resume, or pass --checkpoint none to run "
            "without checkpoints"
        )

    def _remaining(self) -> float:
        if self.outage_since is None:
            return self.retry_s
        return self.retry_s - (time.monotonic() - self.outage_since)

    async def _probe(self) -> str | None:
        if self.probe is None:
            return None
        try:
            async with asyncio.timeout(_PROBE_TIMEOUT_S):
                return await self.probe()
        except Exception:
            return None

    async def call(self, operation: Callable[[], Awaitable[_T]]) -> _T:
        """``await operation()`` under this policy."""
        pause = 0.25
        retried: tuple[type[BaseException], ...] = (TimeoutError, *self.transient)
        while True:
            try:
                if self.attempt_timeout:
                    async with asyncio.timeout(max(self._remaining(), 0.5)):
                        result = await operation()
                else:  # no timer to arm and disarm on every write (SQLite's)
                    result = await operation()
            except retried as exc:
                error: BaseException = exc
                if not isinstance(exc, TimeoutError):
                    self.last_cause = _reason(exc)
            except self.fatal as exc:
                raise self.failed(exc) from None
            else:
                self.outage_since = None
                return result
            if self.outage_since is None:
                self.outage_since = time.monotonic()
            if self._remaining() <= 0:
                raise self.failed(error, await self._probe()) from None
            self.retries += 1
            await asyncio.sleep(min(pause, max(self._remaining(), 0.0)))
            pause = min(pause * 2, _MAX_BACKOFF_S)


class _Guarded(BaseCheckpointSaver[Any]):
    """The asynchronous saver API, each call through ``self.guard``.

    See :func:`guarded_saver_class`.
    """

    guard: StoreGuard

    async def aget_tuple(self, config: Any) -> Any:
        return await self.guard.call(lambda: super(_Guarded, self).aget_tuple(config))

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return await self.guard.call(
            lambda: super(_Guarded, self).aput(config, checkpoint, metadata, new_versions)
        )

    async def aput_writes(
        self, config: Any, writes: Any, task_id: str, task_path: str = ""
    ) -> None:
        await self.guard.call(
            lambda: super(_Guarded, self).aput_writes(config, writes, task_id, task_path)
        )

    async def adelete_thread(self, thread_id: str) -> None:
        await self.guard.call(lambda: super(_Guarded, self).adelete_thread(thread_id))

    async def alist(self, config: Any, **kwargs: Any) -> AsyncIterator[Any]:
        # A listing is not retried half-way (it would repeat items): errors only get the one line.
        try:
            async for item in super().alist(config, **kwargs):
                yield item
        except (*self.guard.fatal, *self.guard.transient) as exc:
            raise self.guard.failed(exc) from None


def guarded_saver_class(base: type) -> type:
    """A subclass of the saver class ``base`` whose async calls go through its ``guard``.

    Set ``saver.guard = StoreGuard(...)`` on the instance before use.
    """
    return type(f"Guarded{base.__name__}", (_Guarded, base), {})
