"""Files a run or an eval writes are private to the user: ``0600`` files, ``0700`` folders.

A results file holds every problem, its ground truth (a code problem's
tests) and the model's answers; a checkpoint holds the same. Written with
the usual ``0644`` they were readable by every user of the machine, and by
code the sandbox ran as ``nobody`` (issue 31). So what ``pacore run`` and
``pacore eval`` create is private whatever the umask:

- the writers set the mode themselves (:data:`FILE_MODE` for the JSONL
  sink, atomic replacements, the output lock and the SQLite checkpoint;
  :func:`private_dir` for the folders they make), so a library caller gets
  private files too;
- the ``run`` and ``eval`` commands hold :func:`private_umask` (``077``) for
  their duration, so what other code creates on their behalf (matplotlib's
  figures, SQLite's ``-wal`` and ``-shm`` files, the judge's cache) is
  private as well; the caller's umask is given back afterwards.

Files that already exist keep their mode (a results file being resumed is
the user's); an eval's results file is rewritten at its end, privately.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["DIR_MODE", "FILE_MODE", "private_dir", "private_umask"]

FILE_MODE = 0o600
"""Files: read and written by their owner only."""

DIR_MODE = 0o700
"""Folders: entered and listed by their owner only."""


def private_dir(path: str | Path) -> Path:
    """``mkdir -p path``, each folder it creates ``0700`` whatever the umask; returns ``path``.

    Folders that already exist are left as they are.
    """
    target = Path(path)
    missing: list[Path] = []
    probe = target
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            continue  # made meanwhile by someone else: theirs
        os.chmod(folder, DIR_MODE)  # mkdir's mode passed through the umask
    if not target.is_dir():
        raise NotADirectoryError(f"not a directory: {target}")
    return target


@contextlib.contextmanager
def private_umask() -> Iterator[None]:
    """The process's umask is ``077`` for the block, then the caller's again.

    The umask is the process's, so this belongs to a command's whole run (the
    CLI), not to a library call made while other threads create files.
    """
    before = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(before)
