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

from pacore_graph.graph.plans import RoundPrompts
from pacore_graph.settings.config import PaCoReConfig, SamplingParams
from pacore_graph.values.records import PaCoReResult, Trajectory

__all__ = [
    "PaCoReInput",
    "PaCoReOutput",
    "PaCoReState",
    "RunShape",
    "collect_trajectories",
    "request_settings",
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
    """A run's shape: its rounds and sampling (kept in the state when its context changed them).

    ``per_round`` is what each round sends when some round has settings of
    its own (a ``Round``, or ``final``): one entry per configured round and
    one more for the answer step (the final synthesis round, or the
    aggregator that replaces it); ``None`` when every round sends ``sampling``.
    """

    schedule: tuple[int, ...]
    sampling: SamplingParams
    preset: str | None = None
    per_round: tuple[SamplingParams, ...] | None = None

    def __post_init__(self) -> None:
        if type(self.schedule) is not tuple:  # a checkpoint round trip gives a list
            object.__setattr__(self, "schedule", tuple(self.schedule))
        if self.per_round is not None and type(self.per_round) is not tuple:
            object.__setattr__(self, "per_round", tuple(self.per_round))

    @classmethod
    def of(cls, config: PaCoReConfig, schedule: tuple[int, ...]) -> RunShape:
        """The shape ``config`` runs as ``schedule`` (its rounds, then the answer step's)."""
        per_round = (
            tuple(config.round_sampling(i) for i in range(len(config.rounds) + 1))
            if config.has_round_settings
            else None
        )
        return cls(
            schedule=schedule,
            sampling=config.sampling,
            preset=config.preset_name(),
            per_round=per_round,
        )

    def sampling_for(self, round_index: int) -> SamplingParams:
        """What round ``round_index`` sends (the answer step is the last index)."""
        if self.per_round is None:
            return self.sampling
        return self.per_round[min(round_index, len(self.per_round) - 1)]

    def settings_for(self, round_index: int, model: str | None = None) -> dict[str, Any] | None:
        """The round's request settings for its records, or None when every round used the run's.

        ``model`` is the client's, named when the round does not set its own.
        """
        if self.per_round is None:
            return None
        return request_settings(self.sampling_for(round_index), model)


def request_settings(params: SamplingParams, model: str | None = None) -> dict[str, Any]:
    """What a record says a call was sent with: temperature, top_p, max_tokens, model.

    ``model`` is the client's, for settings that do not name one.
    """
    return {
        "temperature": params.temperature,
        "top_p": params.top_p,
        "max_tokens": params.max_tokens,
        "model": params.model or model,
    }


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
    plan: RoundPrompts
    """The current round's prompts (its plan's answer; one shared, or one per explorer)."""
    prompt: tuple[dict[str, Any], ...]
    """Only in threads saved before round plans (0.1): the round's one prompt."""
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
    trace: tuple[str, str]
    """The run's first root span (hex trace and span id): a resumed run's spans join it."""
