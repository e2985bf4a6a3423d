"""The token budget (control/budget): later rounds shrink to what the budget affords."""

from __future__ import annotations

import pytest

from pacore_graph.control.budget import TokenBudget

# ----------------------------------------------------------------- token budget


def test_budget_keeps_the_plan_when_it_fits() -> None:
    budget = TokenBudget(10_000)
    first = budget.width(round_index=0, planned=32, final=False, spent=0, trajectories_so_far=0)
    assert first.width == 32 and first.reason is None  # nothing to project from yet
    fits = budget.width(round_index=1, planned=4, final=False, spent=3200, trajectories_so_far=32)
    assert fits.width == 4 and fits.reason is None


def test_budget_shrinks_later_rounds_and_says_why() -> None:
    budget = TokenBudget(3500)
    # 32 trajectories cost 3,200 (100 each); 4 more + 1 final would reach 3,700.
    spent, so_far = 3200, 32
    d = budget.width(round_index=1, planned=4, final=False, spent=spent, trajectories_so_far=so_far)
    per_sample = spent / so_far
    # the widest round that, with the final round's one sample, stays within the budget
    assert 1 <= d.width < 4
    assert spent + (d.width + 1) * per_sample <= budget.limit
    assert spent + (d.width + 2) * per_sample > budget.limit
    assert d.reason is not None and "K 4 -> 2" in d.reason and "3500" in d.reason


def test_budget_never_goes_below_one_and_never_touches_the_final_round() -> None:
    budget = TokenBudget(100)
    d = budget.width(round_index=1, planned=4, final=False, spent=3200, trajectories_so_far=32)
    assert d.width == 1
    final = budget.width(round_index=2, planned=1, final=True, spent=9999, trajectories_so_far=36)
    assert final.width == 1 and final.reason is None
    with pytest.raises(ValueError, match="token-budget"):
        TokenBudget(0)
