"""SIGTERM ends ``pacore run`` / ``pacore eval`` the way Ctrl-C (SIGINT) does.

On Ctrl-C ``asyncio.run`` cancels the run: every ``finally`` runs (the
results file and the checkpoint store are closed, what was saved stays
saved), so the CLI prints one line and a re-run resumes. SIGTERM (``kill``,
a container stopping, a job scheduler's time limit) used to end the process
on the spot with no message. :class:`Termination` cancels the run the same
way -- the task it runs the command in, not by raising where the signal
lands, so it works as well in a job whose SIGINT is ignored (started with
``&`` by a non-interactive shell) -- and the command then ends with
:class:`Terminated`, for exit status 143 (128 + SIGTERM) rather than
Ctrl-C's 130.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Awaitable
from types import FrameType, TracebackType
from typing import Any, TypeVar

__all__ = ["Terminated", "Termination"]

_T = TypeVar("_T")


class Terminated(Exception):
    """The command was cancelled by SIGTERM (it cleaned up; a re-run resumes)."""


class Termination:
    """For the ``with`` block, SIGTERM cancels the command running under :meth:`run`."""

    def __init__(self) -> None:
        self.received = False
        self._task: asyncio.Task[Any] | None = None
        self._previous: Any = None
        self._installed = False

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        self.received = True
        task = self._task
        if task is None or task.done():
            raise KeyboardInterrupt  # not inside the run: stop where we are
        task.get_loop().call_soon_threadsafe(task.cancel)

    async def run(self, command: Awaitable[_T]) -> _T:
        """``await command`` as the task SIGTERM cancels; :class:`Terminated` when it did."""
        self._task = asyncio.current_task()
        try:
            return await command
        except asyncio.CancelledError:
            if self.received:
                raise Terminated from None
            raise
        finally:
            self._task = None

    def __enter__(self) -> Termination:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_term)
            self._installed = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._installed:
            signal.signal(signal.SIGTERM, self._previous)
            self._installed = False
