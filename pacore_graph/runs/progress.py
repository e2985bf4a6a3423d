"""The progress bar of a batch run (``pacore run --input``, ``pacore eval``).

A tqdm bar on stderr, or, with progress off, :class:`NoBar`, which takes the
same calls and does nothing. Not ``tqdm(disable=True)``: even disabled, tqdm
starts a monitor thread and a multiprocessing lock, ~20 ms before the first
request of every run.
"""

from __future__ import annotations

import sys
from typing import IO, Any

__all__ = ["NoBar", "progress_bar"]


class NoBar:
    """What the run loops call on a progress bar, doing nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(
    total: int, *, desc: str, unit: str, enabled: bool, file: IO[str] | None = None
) -> Any:
    """A tqdm bar counting ``unit``\\ s on ``file`` (stderr when None); a :class:`NoBar` if off."""
    if not enabled:
        return NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=file or sys.stderr)
