"""How a run picks its answer when it does not end with a synthesis round.

PaCoRe ends with a K=1 round that reads the last messages. Its baselines end
differently: a single sample is its own answer, and self-consistency takes a
majority vote over the samples' extracted answers. An :class:`Aggregator`
replaces the final round in :func:`~pacore_graph.graph.builder.build_pacore_graph`, so
the baselines are the same graph, the same records and the same effective-TTC
accounting as PaCoRe itself: comparisons at matched compute stay honest.

A vote over many distinct answers costs CPU (math-verify parses each one), so
graphs run an aggregator off the event loop with :func:`aggregate_off_loop`:
in a worker thread, stopped at its next answer when the run is cancelled.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pacore_graph.values.answer_groups import cancellable, group_answers
from pacore_graph.values.answers import answers_equivalent, extract_answer, normalize_answer
from pacore_graph.values.records import Trajectory

__all__ = [
    "Aggregator",
    "FirstAnswer",
    "MajorityVote",
    "Verdict",
    "aggregate_off_loop",
    "extract_final_answer",
    "normalize_answer",
]


def extract_final_answer(text: str, problem: str | None = None) -> str | None:
    r"""The answer a response commits to, normalised for voting.

    :func:`~pacore_graph.values.answers.extract_answer` with the ``number`` fallback:
    the last ``\boxed{}``, a stated answer, else the last number that is not
    part of an unevaluated expression, else (no digit at all) the last line.
    """
    answer = extract_answer(text, problem=problem, fallback="number")
    return normalize_answer(answer.text) if answer is not None else None


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The chosen trajectory and what the choice was based on."""

    trajectory: Trajectory
    answer: str
    details: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Aggregator(Protocol):
    """Chooses the answer from the finished rounds (instead of a synthesis round)."""

    @property
    def name(self) -> str:
        """Short name used in reports."""
        ...

    def aggregate(self, rounds: Sequence[Sequence[Trajectory]]) -> Verdict: ...


def _usable(rounds: Sequence[Sequence[Trajectory]]) -> list[Trajectory]:
    # Explorer order, whatever order the round was passed in: ties and "first" go by index.
    usable = sorted((t for t in rounds[-1] if not t.failed), key=lambda t: t.index)
    if not usable:
        raise ValueError("no successful trajectory to choose an answer from")
    return usable


@dataclass(frozen=True, slots=True)
class FirstAnswer:
    """The first successful trajectory of the last round is the answer (single sample)."""

    name: str = "first"

    def aggregate(self, rounds: Sequence[Sequence[Trajectory]]) -> Verdict:
        chosen = _usable(rounds)[0]
        return Verdict(trajectory=chosen, answer=chosen.message or "")


@dataclass(frozen=True, slots=True)
class MajorityVote:
    """Self-consistency: the most common answer of the last round wins.

    Votes are grouped by equivalence (:func:`~pacore_graph.values.answers.answers_equivalent`:
    text, number or math-verify), so ``0.5``, ``1/2`` and ``\\frac{1}{2}`` vote
    together; a group is named after its first vote in explorer order. Ties go
    to the group whose first vote came from the lowest explorer index, which
    is arbitrary but deterministic (explorer order does not depend on
    scheduling). Responses with no extractable answer do not vote; if none
    can vote, the first successful trajectory is the answer.

    The grouping is :func:`~pacore_graph.values.answer_groups.group_answers`:
    each distinct answer is keyed once and compared only with the groups it
    could join, so the vote is linear in K rather than quadratic.
    """

    extract: Callable[[str], str | None] = extract_final_answer
    equivalent: Callable[[str, str], bool] = answers_equivalent
    name: str = "majority"

    def aggregate(self, rounds: Sequence[Sequence[Trajectory]]) -> Verdict:
        usable = _usable(rounds)
        groups = group_answers([self.extract(t.content) for t in usable], self.equivalent)
        if not groups:
            return Verdict(
                trajectory=usable[0], answer=usable[0].message or "", details={"votes": {}}
            )
        # Positions follow explorer order (``_usable`` sorts by index): ties go to the lowest.
        best = max(groups, key=lambda g: (g.count, -usable[g.first].index))
        chosen = usable[best.first]
        tied = [g for g in groups if g.count == best.count]
        return Verdict(
            trajectory=chosen,
            answer=chosen.message or "",
            details={
                "votes": {g.answer: g.count for g in groups},
                "winner": best.answer,
                "tie": len(tied) > 1,
            },
        )


async def aggregate_off_loop(
    aggregator: Aggregator, rounds: Sequence[Sequence[Trajectory]]
) -> Verdict:
    """``aggregator.aggregate(rounds)`` in a worker thread, stopped when the caller is cancelled.

    Why: graph nodes run on the event loop, and a vote over a thousand
    distinct answers is seconds of CPU; on the loop it would stall every other
    run, health check and signal of the process (``pacore serve``). In a
    thread the loop stays responsive; a cancelled run sets the vote's stop
    event (:func:`~pacore_graph.values.answer_groups.cancellable`), and the
    vote ends at its next answer instead of running on after its run.
    """
    stop = threading.Event()
    with cancellable(stop):  # asyncio.to_thread copies this context into the thread
        try:
            return await asyncio.to_thread(aggregator.aggregate, rounds)
        except asyncio.CancelledError:
            stop.set()  # the thread cannot be killed: it stops at its next check
            raise
