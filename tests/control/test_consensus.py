"""Early stop on consensus (control/consensus): the round's vote and the threshold."""

from __future__ import annotations

import pytest

from pacore_graph.control.consensus import EarlyStop, round_consensus
from pacore_graph.values.records import Trajectory

# ----------------------------------------------------------------- consensus


def traj(index: int, content: str, *, error: str | None = None) -> Trajectory:
    return Trajectory(round=1, index=index, content=content, message=content, error=error)


def test_round_consensus_counts_failures_against_agreement() -> None:
    round_ = [
        traj(0, r"so \boxed{7}"),
        traj(1, "the answer is 8"),
        traj(2, r"\boxed{7}"),
        traj(3, "", error="timeout"),
    ]
    found = round_consensus(round_)
    assert found.answer == "7" and found.share == 0.5
    assert found.trajectory is round_[0] and found.votes == {"7": 2, "8": 1}


def test_early_stop_needs_the_threshold_and_more_than_one_explorer() -> None:
    round_ = [traj(i, rf"\boxed{{{a}}}") for i, a in enumerate([5, 5, 5, 6])]
    assert EarlyStop(0.75).check(round_) is not None
    assert EarlyStop(0.8).check(round_) is None
    assert EarlyStop(0.5).check(round_[:1]) is None
    assert EarlyStop(0.5).check([traj(0, "", error="x"), traj(1, "", error="y")]) is None
    with pytest.raises(ValueError, match="early-stop-consensus"):
        EarlyStop(1.5)
