"""Straggler control (control/quorum): the quorum settings and the round gate, as units.

The gate tests run real asyncio tasks; their ordering comes from events the
test sets, never from sleeping and hoping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from pacore_graph.control.quorum import DROPPED, RoundQuorum, parse_quorum

# ----------------------------------------------------------------- quorum settings


def test_parse_quorum_reads_shares_and_counts() -> None:
    assert parse_quorum("0.75") == 0.75
    assert parse_quorum("1.0") == 1.0
    assert parse_quorum("24") == 24
    for bad in ("0", "-1", "abc", "2.5", "nan"):
        with pytest.raises(ValueError, match="--round-quorum"):
            parse_quorum(bad)


def test_required_explorers_per_round() -> None:
    share = RoundQuorum(quorum=0.75)
    assert [share.required(k) for k in (32, 4, 1)] == [24, 3, 1]
    count = RoundQuorum(quorum=24)
    assert [count.required(k) for k in (32, 4, 1)] == [24, 4, 1]
    assert RoundQuorum(deadline=3.0).required(32) == 32
    assert not RoundQuorum().enabled and RoundQuorum(quorum=2).enabled


def test_bad_quorum_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="share"):
        RoundQuorum(quorum=1.5)
    with pytest.raises(ValueError, match="deadline"):
        RoundQuorum(deadline=0)


# ----------------------------------------------------------------- the gate


async def test_quorum_closes_the_round_and_cancels_the_stragglers() -> None:
    gate = RoundQuorum(quorum=2).gate(4)
    release = [asyncio.Event() for _ in range(4)]
    cancelled: list[int] = []

    def call(i: int) -> Callable[[], Awaitable[str]]:
        async def go() -> str:
            try:
                await release[i].wait()
            except asyncio.CancelledError:
                cancelled.append(i)
                raise
            return f"t{i}"

        return go

    tasks = [asyncio.create_task(gate.run(call(i))) for i in range(4)]
    release[2].set()
    release[0].set()
    results = await asyncio.gather(*tasks)
    assert results == ["t0", DROPPED, "t2", DROPPED]
    assert sorted(cancelled) == [1, 3]  # cancelled upstream, not left running
    assert (gate.finished, gate.dropped, gate.reason) == (2, 2, "quorum 2/4")


async def test_failures_count_as_finished_and_still_raise() -> None:
    gate = RoundQuorum(quorum=1).gate(2)
    hold = asyncio.Event()

    async def boom() -> str:
        raise RuntimeError("server said no")

    async def slow() -> str:
        await hold.wait()
        return "late"

    first = asyncio.create_task(gate.run(boom))
    second = asyncio.create_task(gate.run(slow))
    with pytest.raises(RuntimeError, match="server said no"):
        await first
    assert await second is DROPPED


async def test_deadline_waits_for_a_first_finisher_then_closes() -> None:
    gate = RoundQuorum(deadline=0.01).gate(3)
    done = asyncio.Event()
    never = asyncio.Event()

    async def first() -> str:
        await done.wait()
        return "first"

    async def straggler() -> str:
        await never.wait()
        return "never"

    tasks = [asyncio.create_task(gate.run(f)) for f in (first, straggler, straggler)]
    while not gate.deadline_passed:  # the deadline passes with nobody finished...
        await asyncio.sleep(0.005)
    assert not gate.closed  # ...and the round stays open: no blind next round
    done.set()
    assert await asyncio.gather(*tasks) == ["first", DROPPED, DROPPED]
    assert gate.reason == "deadline 0.01s"


async def test_the_final_round_of_one_is_never_cut() -> None:
    gate = RoundQuorum(quorum=0.1, deadline=0.001).gate(1)
    assert gate.required == 1 and gate.deadline is None

    async def answer() -> str:
        await asyncio.sleep(0.01)
        return "answer"

    assert await gate.run(answer) == "answer"
    assert not gate.closed


async def test_a_full_round_under_quorum_closes_nothing() -> None:
    gate = RoundQuorum(quorum=1.0).gate(3)

    async def ok() -> str:
        return "ok"

    assert await asyncio.gather(*(gate.run(ok) for _ in range(3))) == ["ok"] * 3
    assert gate.dropped == 0 and gate.reason is None
