"""Processor sharing in virtual time: the arithmetic behind the throughput-bound server.

``n`` sequences in flight each decode at ``min(cap, throughput / n)`` tokens
per second. Times are given, never measured, so every expectation is exact
arithmetic over the inputs.
"""

from __future__ import annotations

import random

import pytest

from pacore_graph.testing.processor_sharing import ProcessorSharing


def test_one_sequence_runs_at_the_per_sequence_cap() -> None:
    ps = ProcessorSharing(throughput=1000, per_sequence_cap=100)
    ps.admit(0.0, 50)
    assert ps.rate() == 100
    assert ps.next_finish() == pytest.approx(0.5)
    assert ps.finish_due(0.4) == []
    assert len(ps.finish_due(0.5)) == 1
    assert ps.stats(0.5).tokens_generated == 50


def test_sequences_share_the_throughput_equally() -> None:
    ps = ProcessorSharing(throughput=100, per_sequence_cap=1000)
    short = ps.admit(0.0, 100)
    long = ps.admit(0.0, 300)
    assert ps.rate() == 50  # two in flight: half each
    assert ps.next_finish() == pytest.approx(2.0)
    assert ps.finish_due(2.0) == [short]
    assert ps.rate() == 100  # alone now: all of it
    assert ps.next_finish() == pytest.approx(4.0)  # 200 tokens left at 100/s
    assert ps.finish_due(4.0) == [long]
    stats = ps.stats(4.0)
    # Saturated the whole time: the physical limit tokens/throughput is met exactly.
    assert stats.tokens_generated == 400
    assert stats.busy_seconds == pytest.approx(400 / 100)
    assert stats.peak_in_flight == 2 and stats.completed == 2


def test_a_late_arrival_slows_the_sequence_already_running() -> None:
    ps = ProcessorSharing(throughput=100, per_sequence_cap=1000)
    first = ps.admit(0.0, 200)
    ps.admit(1.0, 50)  # first has 100 left; from now on 50/s each
    assert ps.next_finish() == pytest.approx(2.0)  # the newcomer's 50 tokens
    ps.finish_due(2.0)
    assert ps.next_finish() == pytest.approx(2.5)  # first: 50 left at 100/s
    assert ps.finish_due(2.5) == [first]


def test_cancel_counts_the_tokens_decoded_so_far_and_frees_the_share() -> None:
    ps = ProcessorSharing(throughput=100, per_sequence_cap=1000)
    doomed = ps.admit(0.0, 1000)
    other = ps.admit(0.0, 100)
    ps.cancel(1.0, doomed)  # it got 50 tokens
    assert ps.rate() == 100
    assert ps.next_finish() == pytest.approx(1.5)  # other: 50 left at 100/s
    assert ps.finish_due(1.5) == [other]
    stats = ps.stats(1.5)
    assert (stats.cancelled, stats.completed, stats.tokens_generated) == (1, 1, 150)


def test_bad_rates_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        ProcessorSharing(throughput=0, per_sequence_cap=10)


@pytest.mark.parametrize(
    ("throughput", "cap", "n"), [(100.0, 1000.0, 4), (1000.0, 100.0, 4), (300.0, 100.0, 3)]
)
def test_equal_sequences_finish_together_at_the_shared_rate(
    throughput: float, cap: float, n: int
) -> None:
    length = 120
    ps = ProcessorSharing(throughput=throughput, per_sequence_cap=cap)
    ids = [ps.admit(0.0, length) for _ in range(n)]
    rate = min(cap, throughput / n)
    assert ps.rate() == pytest.approx(rate) and ps.in_flight == n
    finish = length / rate
    assert ps.next_finish() == pytest.approx(finish)
    assert ps.finish_due(finish * 0.99) == []
    assert sorted(ps.finish_due(finish)) == sorted(ids)
    stats = ps.stats(finish)
    assert stats.tokens_generated == n * length and stats.completed == n
    assert stats.busy_seconds == pytest.approx(finish)


def test_saturated_work_takes_total_tokens_over_throughput() -> None:
    """Whatever the lengths and arrivals (all at 0), a saturated server ends at sum / throughput."""
    rng = random.Random(7)
    lengths = [rng.randint(10, 500) for _ in range(12)]
    throughput = 250.0
    ps = ProcessorSharing(throughput=throughput, per_sequence_cap=throughput)  # never cap-bound
    for length in lengths:
        ps.admit(0.0, length)
    done: list[int] = []
    while (at := ps.next_finish()) is not None:
        done += ps.finish_due(at)
        last = at
    assert len(done) == len(lengths)
    assert last == pytest.approx(sum(lengths) / throughput)
    assert ps.stats(last).tokens_generated == sum(lengths)


def test_reset_stats_zeroes_the_counters_but_not_the_work() -> None:
    ps = ProcessorSharing(throughput=100, per_sequence_cap=1000)
    ps.admit(0.0, 100)
    ps.finish_due(1.0)
    ps.admit(1.0, 50)
    ps.reset_stats()
    stats = ps.stats(1.0)
    assert (stats.completed, stats.tokens_generated) == (0, 0)
    assert ps.in_flight == 1
