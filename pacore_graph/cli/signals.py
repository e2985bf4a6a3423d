"""SIGTERM ends ``pacore run`` / ``pacore eval`` the way Ctrl-C (SIGINT) does.

``asyncio.run`` turns SIGINT into a cancellation of the run: every
``finally`` runs (the results file and the checkpoint store are closed, what
was saved stays saved) and ``KeyboardInterrupt`` comes out, so the CLI prints
one line and a re-run resumes. SIGTERM (``kill``, a container stopping, a
job scheduler's time limit) used to end the process on the spot with no
message. :class:`TerminateAsInterrupt` delivers it as SIGINT instead and
remembers that it did (it calls the SIGINT handler in place, so a job whose
SIGINT is ignored still stops), so the exit status can be 143 (128 + SIGTERM)
rather than Ctrl-C's 130.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any

__all__ = ["TerminateAsInterrupt"]


class TerminateAsInterrupt:
    """For the ``with`` block: SIGTERM raises SIGINT; ``received`` says whether it came."""

    def __init__(self) -> None:
        self.received = False
        self._previous: Any = None
        self._installed = False

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        self.received = True
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            # asyncio.run's SIGINT handler (cancel the run) or Python's default
            # one (raise KeyboardInterrupt): exactly what a Ctrl-C would do.
            handler(signal.SIGINT, frame)
            return
        # SIGINT ignored (a job started with ``&`` by a non-interactive shell): stop anyway.
        raise KeyboardInterrupt

    def __enter__(self) -> TerminateAsInterrupt:
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
