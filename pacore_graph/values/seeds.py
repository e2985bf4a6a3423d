"""The one place that decides which seed each sample is drawn with.

A seeded PaCoRe run must be reproducible *and* keep its parallelism: the K
explorers of a round must not all be sent the same seed, or a server that
samples each request on its own (llama.cpp ignores ``n``) returns K copies of
one trajectory. So every sample has its own seed, derived here and nowhere
else:

- explorer ``i`` of round ``r`` samples with ``base + 1000 * r + i``
  (:func:`explorer_seed`);
- a request for ``n`` samples carries the seed of its first sample; when it
  has to be split (a server that ignores ``n``, or a failed batch retried in
  smaller requests), sample ``j`` of it is fetched with ``seed + j``
  (:func:`sample_seed`), which is exactly the seed explorer ``i + j`` would
  have sent on its own.
"""

from __future__ import annotations

__all__ = ["ROUND_STRIDE", "explorer_seed", "sample_seed"]

#: Seeds of consecutive rounds are this far apart (rounds wider than this overlap).
ROUND_STRIDE = 1000


def explorer_seed(base: int | None, round_index: int, index: int) -> int | None:
    """The seed of explorer ``index`` in round ``round_index`` (None when unseeded)."""
    if base is None:
        return None
    return base + ROUND_STRIDE * round_index + index


def sample_seed(first: int | None, offset: int) -> int | None:
    """The seed of the ``offset``-th sample of a request whose first sample has ``first``."""
    if first is None:
        return None
    return first + offset
