"""How a run picks its answer when it does not end with a synthesis round.

PaCoRe ends with a K=1 round that reads the last messages. Its baselines end
differently: a single sample is its own answer, and self-consistency takes a
majority vote over the samples' extracted answers. An :class:`Aggregator`
replaces the final round in :func:`~pacore_graph.graph.build_pacore_graph`, so
the baselines are the same graph, the same records and the same effective-TTC
accounting as PaCoRe itself: comparisons at matched compute stay honest.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pacore_graph.compaction import extract_boxed, split_conclusion
from pacore_graph.records import Trajectory

__all__ = [
    "Aggregator",
    "FirstAnswer",
    "MajorityVote",
    "Verdict",
    "extract_final_answer",
    "normalize_answer",
]

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")


def normalize_answer(text: str) -> str:
    """Canonical text for vote counting: no spaces, ``$``, trailing period or commas in numbers."""
    text = text.strip().strip("$").strip().rstrip(".").strip()
    text = re.sub(r"\s+", "", text)
    if re.fullmatch(r"-?\d[\d,]*(\.\d+)?", text):
        text = text.replace(",", "")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
    return text


def extract_final_answer(text: str) -> str | None:
    r"""The answer a response commits to: last ``\boxed{}``, else last number, else last line."""
    conclusion = split_conclusion(text)
    boxed = extract_boxed(conclusion)
    if boxed:
        return normalize_answer(boxed[-1])
    numbers = _NUMBER.findall(conclusion)
    if numbers:
        return normalize_answer(numbers[-1])
    lines = [line.strip() for line in conclusion.splitlines() if line.strip()]
    return normalize_answer(lines[-1]) if lines else None


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
    """Self-consistency: the most common extracted answer of the last round wins.

    Ties go to the answer whose first vote came from the lowest explorer index,
    which is arbitrary but deterministic (explorer order does not depend on
    scheduling). Responses with no extractable answer do not vote; if none
    can vote, the first successful trajectory is the answer.
    """

    extract: Callable[[str], str | None] = extract_final_answer
    name: str = "majority"

    def aggregate(self, rounds: Sequence[Sequence[Trajectory]]) -> Verdict:
        usable = _usable(rounds)
        votes: list[tuple[str, Trajectory]] = []
        for t in usable:
            answer = self.extract(t.content)
            if answer:
                votes.append((answer, t))
        if not votes:
            return Verdict(
                trajectory=usable[0], answer=usable[0].message or "", details={"votes": {}}
            )
        counts = Counter(a for a, _ in votes)
        first_seen: dict[str, Trajectory] = {}
        for answer, t in votes:
            first_seen.setdefault(answer, t)
        best = max(counts, key=lambda a: (counts[a], -first_seen[a].index))
        chosen = first_seen[best]
        tied = sorted(a for a, c in counts.items() if c == counts[best])
        return Verdict(
            trajectory=chosen,
            answer=chosen.message or "",
            details={"votes": dict(counts), "winner": best, "tie": len(tied) > 1},
        )
