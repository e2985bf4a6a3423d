"""One writer per results file: advisory locks beside it and on it, held for the whole run.

Two ``pacore run`` with the same ``--output`` (or two ``pacore eval`` with
the same ``--out``) would each run every unfinished problem and append
duplicate lines. The second is refused instead: the first holds an
exclusive ``flock`` on ``OUTPUT.lock`` (``DIR/results.jsonl.lock``), which
the kernel releases when the holder exits in any way, ``kill -9``
included, so a crash never leaves a lock that has to be removed by hand.
The file holds the holder's pid for the message; it is removed on a normal
release (a taker that opened it just before re-checks that the file it
locked is still the one at the path, so removing it races with nobody).

That lock is named by the output's path (symlinks resolved), and a hard link
has a path of its own: a run on a hard link of a running run's output took
its own lock and ran every problem again (issue 31: 156 model calls instead
of 90). So the holder also ``flock`` s the output file itself, which the
kernel keys by inode whatever the name it was opened by; the output is
created (``0600``) for it when missing and removed on release if still
empty. The holder of that lock is named from ``/proc/locks``. The output
rewritten at the end of an eval (one line per run, by rename) is a new
inode; the lock beside it still holds until the run exits.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from pacore_graph.errors import PaCoReError
from pacore_graph.runs.private_files import FILE_MODE, private_dir

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


def _inode_holder(st: os.stat_result) -> str:
    """``pid N`` of the process holding a ``flock`` on the file ``st`` describes (Linux).

    ``/proc/locks`` names a file ``MAJ:MIN:INODE``; on an overlay filesystem
    the device there may be the layer's, so an inode held once is taken too.
    """
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    by_inode: set[str] = set()
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            for line in f:
                fields = line.split()
                if "FLOCK" not in fields or len(fields) < 4 or not fields[-4].isdigit():
                    continue
                if fields[-3] == where:
                    return f"pid {fields[-4]}"
                if fields[-3].endswith(f":{st.st_ino}"):
                    by_inode.add(fields[-4])
    except OSError:
        pass
    return f"pid {by_inode.pop()}" if len(by_inode) == 1 else "another process"


def _lock_the_file_itself(output: Path) -> tuple[int, bool]:
    """The output open and ``flock`` ed (made ``0600`` when missing), and whether we made it."""
    while True:
        created = False
        try:
            fd = os.open(output, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            try:
                flags = os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
                fd = os.open(output, flags, FILE_MODE)
            except FileExistsError:
                continue
            created = True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _inode_holder(os.fstat(fd))
            os.close(fd)
            raise OutputLockedError(
                f"{output} is being written by {holder} (its lock is on the file itself, "
                "reached by another name: a hard link?); wait for it to finish, "
                "or pick another output"
            ) from None
        except BaseException:
            os.close(fd)
            raise
        if _same_file(output, os.fstat(fd)):
            return fd, created
        os.close(fd)  # its holder removed it as we opened it: take the new one


def _same_file(path: Path, held: os.stat_result) -> bool:
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


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
    private_dir(lock.parent)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
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
        if _same_file(lock, os.fstat(fd)):
            break
        os.close(fd)  # its holder removed it as we opened it: take the new one
    try:
        with contextlib.suppress(OSError):  # the pid only improves the message
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
        file_fd, created = _lock_the_file_itself(output)
        try:
            yield lock
        finally:
            held = os.fstat(file_fd)
            if created and held.st_size == 0 and _same_file(output, held):
                with contextlib.suppress(OSError):
                    output.unlink()  # made for the lock, never written: as if never there
            os.close(file_fd)
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()
        os.close(fd)
