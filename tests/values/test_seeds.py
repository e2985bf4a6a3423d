"""The seeds rule: each sample of a seeded run has its own seed, derived in one place.

A server that samples each request on its own (llama.cpp ignores ``n``) must
still return K different trajectories, and a request split into smaller ones
must send exactly the seeds its explorers would have sent on their own.
"""

from __future__ import annotations

import pytest

from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.values.seeds import ROUND_STRIDE, explorer_seed, sample_seed


def test_seed_derivation_is_one_rule() -> None:
    assert explorer_seed(None, 1, 2) is None
    assert explorer_seed(7, 0, 3) == 7 + 3
    assert explorer_seed(7, 2, 0) == 7 + 2 * ROUND_STRIDE
    # Sample j of a request that starts at explorer i is explorer i + j's own seed.
    assert sample_seed(explorer_seed(7, 1, 2), 3) == explorer_seed(7, 1, 5)
    assert sample_seed(None, 3) is None


@pytest.mark.parametrize("base", [0, 5, 2**31])
def test_every_explorer_of_a_run_gets_its_own_seed(base: int) -> None:
    schedule = PaCoReConfig.from_preset("high").schedule  # the widest preset's shape
    seeds = [explorer_seed(base, r, i) for r, width in enumerate(schedule) for i in range(width)]
    assert len(set(seeds)) == sum(schedule)


@pytest.mark.parametrize("split", [[4], [1, 1, 1, 1], [3, 1], [1, 2, 1]])
def test_a_split_request_sends_the_seeds_of_the_explorers_it_stands_for(split: list[int]) -> None:
    # A round of 4 sent as one request and then split into pieces of these sizes:
    # piece p starts at explorer ``start`` and its sample j is explorer start + j.
    sent: list[int | None] = []
    start = 0
    for size in split:
        first = explorer_seed(9, 1, start)
        sent.extend(sample_seed(first, j) for j in range(size))
        start += size
    assert sent == [explorer_seed(9, 1, i) for i in range(4)]
