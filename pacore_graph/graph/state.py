"""The PaCoRe graph's state, input and output schemas.

``messages`` uses LangGraph's ``add_messages`` reducer, so the graph speaks
``MessagesState``: a user's chat graph can add the compiled PaCoRe graph as a
node and get the answer appended to its conversation as an ``AIMessage``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from pacore_graph.graph.records import PaCoReResult, Trajectory
from pacore_graph.settings.config import SamplingParams

__all__ = [
    "PaCoReInput",
    "PaCoReOutput",
    "PaCoReState",
    "RunShape",
    "collect_trajectories",
]


def collect_trajectories(
    current: list[Trajectory] | None, update: list[Trajectory] | None
) -> list[Trajectory]:
    """Fan-in reducer: explorers append; the compaction node empties it with None."""
    if update is None:
        return []
    return [*(current or ()), *update]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunShape:
    """A run's shape: its rounds and sampling (kept in the state when its context changed them)."""

    schedule: tuple[int, ...]
    sampling: SamplingParams
    preset: str | None = None

    def __post_init__(self) -> None:
        if type(self.schedule) is not tuple:  # a checkpoint round trip gives a list
            object.__setattr__(self, "schedule", tuple(self.schedule))


class PaCoReInput(TypedDict, total=False):
    """What a caller passes: the conversation (its last user message is the problem)."""

    messages: Annotated[list[AnyMessage], add_messages]
    problem_id: str


class PaCoReOutput(TypedDict, total=False):
    """What a caller gets back: the conversation with the answer, and the full record."""

    messages: Annotated[list[AnyMessage], add_messages]
    answer: str
    result: PaCoReResult


class PaCoReState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    problem_id: str
    answer: str
    result: PaCoReResult
    # Internal: the run in progress.
    run_id: str
    started: float
    conversation: tuple[dict[str, Any], ...]
    round: int
    prompt: tuple[dict[str, Any], ...]
    prompt_refs: tuple[int, ...]
    pending: Annotated[list[Trajectory], collect_trajectories]
    rounds: tuple[tuple[Trajectory, ...], ...]
    # Round control (quorum/deadline, token budget, early stop): the width the
    # current round runs at, why it differs from the plan, what each round did.
    width: int
    width_reason: str | None
    control: tuple[dict[str, Any], ...]
    stopped: dict[str, Any] | None
    settings: RunShape
    compactor: str
