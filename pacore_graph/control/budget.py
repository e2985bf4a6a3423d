"""A compute budget per problem: shrink later rounds to fit ``--token-budget N``.

Why: PaCoRe's cost is its effective test-time compute (the completion tokens
of all its trajectories); a user with a fixed budget per problem wants the
method's shape, scaled down, rather than a run cut off mid-round. Before each
round after the first, the budget projects the round's cost as its width
times the mean completion tokens per trajectory so far, plus one trajectory
reserved for the final K=1 round. When the tokens spent plus that projection
would pass N, the round's K shrinks to what fits, never below 1; the final
K=1 round always runs, so a run may end a little over N. Each decision says
why, and the result records the widths actually run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["TokenBudget", "WidthDecision"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WidthDecision:
    """The width a round runs at, against the width planned, and why they differ."""

    round: int
    planned: int
    width: int
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """At most ``limit`` completion tokens per problem (the final round excepted)."""

    limit: int

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or self.limit < 1:
            raise ValueError(f"--token-budget must be a positive token count; got {self.limit!r}")

    def width(
        self,
        *,
        round_index: int,
        planned: int,
        final: bool,
        spent: int,
        trajectories_so_far: int,
    ) -> WidthDecision:
        """Decide round ``round_index``'s width from the tokens ``spent`` so far.

        With no trajectory yet (the first round) there is nothing to project
        from, so the first round runs as planned.
        """
        if final or planned <= 1 or trajectories_so_far <= 0:
            return WidthDecision(round=round_index, planned=planned, width=planned)
        per_sample = max(spent / trajectories_so_far, 1.0)
        reserve = per_sample  # the final K=1 round
        projected = spent + planned * per_sample + reserve
        if projected <= self.limit:
            return WidthDecision(round=round_index, planned=planned, width=planned)
        affordable = math.floor((self.limit - spent - reserve) / per_sample)
        width = max(1, min(planned, affordable))
        reason = (
            f"token budget {self.limit}: {spent} spent + {planned} x {per_sample:.0f} projected "
            f"+ {reserve:.0f} for the final round would pass it; K {planned} -> {width}"
        )
        return WidthDecision(round=round_index, planned=planned, width=width, reason=reason)
