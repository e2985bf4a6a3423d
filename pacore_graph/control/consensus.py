"""Early stop on consensus: end a run once a round's answers already agree.

Why: when most explorers of a round commit to the same answer, later rounds
mostly restate it; stopping there saves their tokens. It changes the method,
so it is optional (``--early-stop-consensus F``): after a non-final round
whose extracted answers agree at share >= F, the run answers with the first
(lowest explorer index) message carrying the majority answer, and the result
records the stop and the tokens the skipped rounds were projected to cost.

Answers are extracted with the same rule as majority voting
(:func:`pacore_graph.values.aggregation.extract_final_answer`). The share's
denominator is every explorer of the round that was not dropped by straggler
control: failed calls and answers that cannot be extracted count against
agreement.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pacore_graph.values.aggregation import extract_final_answer
from pacore_graph.values.answer_groups import group_answers
from pacore_graph.values.records import Trajectory

__all__ = ["Consensus", "EarlyStop", "round_consensus"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Consensus:
    """How far one round's explorers agree."""

    answer: str | None
    """The most common extracted answer (None if no explorer gave one)."""
    share: float
    """Explorers giving it over explorers counted (0.0 for an empty round)."""
    trajectory: Trajectory | None
    """The lowest-index explorer giving it: its message is the run's answer on a stop."""
    votes: dict[str, int] = field(default_factory=dict)


def round_consensus(
    trajectories: Sequence[Trajectory],
    extract: Callable[[str], str | None] = extract_final_answer,
) -> Consensus:
    """The majority answer of a round and its share (ties: lowest explorer index).

    Answers agree when their extracted texts are equal (the votes' grouping
    routine with exact text): this check runs on the event loop after every
    round, so it does no symbolic comparison.
    """
    ordered = sorted(trajectories, key=lambda t: t.index)
    answers = [None if t.failed else extract(t.content) for t in ordered]
    groups = group_answers(answers, None)
    if not groups:
        return Consensus(answer=None, share=0.0, trajectory=None)
    best = max(groups, key=lambda g: (g.count, -ordered[g.first].index))
    return Consensus(
        answer=best.answer,
        share=best.count / len(ordered),
        trajectory=ordered[best.first],
        votes={g.answer: g.count for g in groups},
    )


@dataclass(frozen=True, slots=True)
class EarlyStop:
    """``--early-stop-consensus F``: stop after a round agreeing at share >= ``threshold``."""

    threshold: float
    extract: Callable[[str], str | None] = extract_final_answer

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 1:
            raise ValueError(
                f"--early-stop-consensus takes a share in (0, 1]; got {self.threshold!r}"
            )

    def check(self, trajectories: Sequence[Trajectory]) -> Consensus | None:
        """The consensus to stop on, or None to go on. A round of one never stops early."""
        if len(trajectories) < 2:
            return None
        found = round_consensus(trajectories, self.extract)
        if found.trajectory is None or found.share < self.threshold:
            return None
        return found
