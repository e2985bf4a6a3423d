"""The lifecycle every code-execution backend implements, and shared plumbing for one.

A container or a remote sandbox can replace :class:`~.local.LocalSandbox`
without touching the tools, as long as it follows :class:`CodeExecutor`.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from .values import ExecRequest, ExecResult

__all__ = ["BaseCodeExecutor", "CodeExecutor"]


@runtime_checkable
class CodeExecutor(Protocol):
    """The lifecycle every code-execution backend implements.

    ``start`` prepares the backend (and raises :class:`SandboxUnavailableError`
    if it cannot work here); ``execute`` runs one request and returns its
    result, raising only :class:`SandboxError`; ``aexecute`` does the same
    without ever blocking the event loop; ``shutdown`` releases everything and
    is idempotent. Implementations must be safe to call from several threads
    and tasks at once: parallel explorers share nothing but may share one
    executor.
    """

    def start(self) -> None: ...

    def execute(self, request: ExecRequest) -> ExecResult: ...

    async def aexecute(self, request: ExecRequest) -> ExecResult: ...

    def shutdown(self) -> None: ...


class BaseCodeExecutor:
    """Context-manager plumbing and a thread-based ``aexecute`` for backends.

    A backend implements ``start``, ``execute`` and ``shutdown``; ``with`` and
    ``async with`` then start and shut it down.
    """

    def start(self) -> None:
        """Prepare the backend; the default has nothing to prepare."""

    def execute(self, request: ExecRequest) -> ExecResult:
        raise NotImplementedError

    async def aexecute(self, request: ExecRequest) -> ExecResult:
        """Run :meth:`execute` in a worker thread so the event loop stays free."""
        import asyncio  # here: importing the executors stays cheap

        return await asyncio.to_thread(self.execute, request)

    def shutdown(self) -> None:
        """Release the backend; the default has nothing to release."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    async def __aenter__(self) -> Self:
        import asyncio

        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()
