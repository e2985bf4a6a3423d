"""One writer per results file: an advisory lock beside it, held for the whole run.

Two ``pacore run`` with the same ``--output`` (or two ``pacore eval`` with
the same ``--out``) would each run every unfinished problem and append
duplicate lines. The second is refused instead: the first holds an
exclusive ``flock`` on ``OUTPUT.lock`` (``DIR/results.jsonl.lock``), which
the kernel releases when the holder exits in any way, ``kill -9``
included, so a crash never leaves a lock that has to be removed by hand.
The file holds the holder's pid for the message; it is removed on a normal
release (a taker that opened it just before re-checks that the file it
locked is still the one at the path, so removing it races with nobody).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from pacore_graph.errors import PaCoReError

__all__ = ["LOCK_SUFFIX", "OutputLockedError", "hold_output_lock", "lock_path"]

#: Appended to a results file's name to name its lock.
LOCK_SUFFIX = ".lock"


class OutputLockedError(PaCoReError):
    """Another live process holds the results file's lock."""


def lock_path(output: Path) -> Path:
    """Where the lock of the results file ``output`` lives.

    Beside the file a symlink leads to, so two names of one file share one lock.
    """
    real = output.resolve()
    return real.with_name(real.name + LOCK_SUFFIX)


def _holder(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return "another process"
    return f"pid {text}" if text.isdigit() else "another process"


@contextlib.contextmanager
def hold_output_lock(output: Path) -> Iterator[Path]:
    """Hold ``output``'s lock for the block (yields the lock's path).

    Raises :class:`OutputLockedError` (one line, naming the holder's pid)
    when a live process holds it; never waits.
    """
    lock = lock_path(output)
    lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise OutputLockedError(
                f"{output} is being written by {_holder(lock)} (lock {lock}); "
                "wait for it to finish, or pick another output"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        held = os.fstat(fd)
        try:
            now = os.stat(lock)
        except FileNotFoundError:
            now = None
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            break
        os.close(fd)  # its holder removed it as we opened it: take the new one
    try:
        with contextlib.suppress(OSError):  # the pid only improves the message
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        yield lock
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()
        os.close(fd)
