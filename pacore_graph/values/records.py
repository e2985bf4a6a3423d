"""The immutable records that flow through a run: samples, trajectories, results.

They are frozen, slotted, keyword-only dataclasses (like LangGraph's ``Send``):
cheap to create by the thousand, safe to share between parallel explorers, and
plain enough to serialise to the JSON the CLI prints and the RL adapter reads.
Rounds and indices are 0-based; the final K=1 round is the last round.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = [
    "Completion",
    "PaCoReResult",
    "ToolCallRecord",
    "Trajectory",
    "trajectory_id",
]


def trajectory_id(round_index: int, index: int) -> str:
    """Stable name of a trajectory within a run, e.g. ``r0.3``."""
    return f"r{round_index}.{index}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """One sample returned by a chat model: what the server said, nothing inferred.

    ``tokens_estimated`` is true when the server reported usage only for a
    whole ``n``-sample request and this sample's share was apportioned by
    text length (the total over the request stays exact).
    """

    content: str
    reasoning: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    tokens_estimated: bool = False
    logprobs: Any = None
    token_ids: tuple[int, ...] | None = None
    model: str | None = None
    seed: int | None = None
    """The seed of the request this sample came from (shared by an ``n``-sample request)."""
    tool_calls: tuple[Mapping[str, Any], ...] = ()
    """The tool calls the model made, as the server sent them (OpenAI's ``tool_calls``)."""

    def __post_init__(self) -> None:
        if type(self.tool_calls) is not tuple:  # a checkpoint round trip gives a list
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallRecord:
    """One tool call made by a tool-using explorer, and what it returned."""

    name: str
    arguments: Mapping[str, Any]
    output: str
    error: str | None = None
    latency_s: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Trajectory:
    """One explorer's call in one round, with its compacted message.

    A failed call has ``error`` set and ``message`` None: it is recorded, never
    turned into an empty string, and it is left out of the next round's
    references. ``references`` are the indices (in the previous round) of the
    messages that were in this trajectory's prompt, in prompt order: the edges
    of the run's message-passing graph.
    """

    round: int
    index: int
    content: str = ""
    reasoning: str | None = None
    message: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    error: str | None = None
    references: tuple[int, ...] = ()
    tokens_estimated: bool = False
    tool_calls: tuple[ToolCallRecord, ...] = ()
    logprobs: Any = None
    token_ids: tuple[int, ...] | None = None
    artifacts: Mapping[str, Any] = field(default_factory=dict)
    """What a tool explorer produced besides text, e.g. a SWE attempt's diff and tests."""
    model: str | None = None
    """The model that answered (the server's name for it, else the one asked for)."""
    sampling: Mapping[str, Any] | None = None
    """What this trajectory's round sent when the round had settings of its own (a
    ``Round``: ``temperature``, ``top_p``, ``max_tokens``, ``model``); ``None`` when
    it used the run's (``PaCoReResult.extra["sampling"]``)."""

    def __post_init__(self) -> None:
        # A checkpoint round trip (msgpack) turns tuples into lists; keep them tuples.
        if type(self.references) is not tuple:
            object.__setattr__(self, "references", tuple(self.references))
        if type(self.tool_calls) is not tuple:
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if self.token_ids is not None and type(self.token_ids) is not tuple:
            object.__setattr__(self, "token_ids", tuple(self.token_ids))

    @property
    def id(self) -> str:
        return trajectory_id(self.round, self.index)

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def truncated(self) -> bool:
        """The server stopped it at ``max_tokens`` (or the context limit)."""
        return self.finish_reason == "length"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record (the CLI's ``rounds`` entries and results.jsonl)."""
        # Shallow on purpose: ``asdict`` deep-copies every field (logprobs and
        # token ids included) and was the costliest call of writing results.
        data = {name: getattr(self, name) for name in _TRAJECTORY_FIELDS}
        data["id"] = self.id
        data["failed"] = self.failed
        data["truncated"] = self.truncated
        data["references"] = list(self.references)
        data["tool_calls"] = [dict(asdict(call)) for call in self.tool_calls]
        data["artifacts"] = dict(self.artifacts)
        if self.sampling is None:
            del data["sampling"]  # the run's sampling: no key, as before rounds had their own
        else:
            data["sampling"] = dict(self.sampling)
        if self.token_ids is not None:
            data["token_ids"] = list(self.token_ids)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Trajectory:
        """Inverse of :meth:`to_dict` (derived keys are ignored)."""
        calls = tuple(
            ToolCallRecord(
                name=c["name"],
                arguments=c.get("arguments", {}),
                output=c.get("output", ""),
                error=c.get("error"),
                latency_s=c.get("latency_s", 0.0),
            )
            for c in data.get("tool_calls", ())
        )
        token_ids = data.get("token_ids")
        return cls(
            round=int(data["round"]),
            index=int(data["index"]),
            content=data.get("content", ""),
            reasoning=data.get("reasoning"),
            message=data.get("message"),
            finish_reason=data.get("finish_reason"),
            prompt_tokens=int(data.get("prompt_tokens", 0)),
            completion_tokens=int(data.get("completion_tokens", 0)),
            latency_s=float(data.get("latency_s", 0.0)),
            error=data.get("error"),
            references=tuple(data.get("references", ())),
            tokens_estimated=bool(data.get("tokens_estimated", False)),
            tool_calls=calls,
            logprobs=data.get("logprobs"),
            token_ids=tuple(token_ids) if token_ids is not None else None,
            artifacts=dict(data.get("artifacts") or {}),
            model=data.get("model"),
            sampling=data.get("sampling"),
        )


_TRAJECTORY_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Trajectory))


@dataclass(frozen=True, slots=True, kw_only=True)
class PaCoReResult:
    """The outcome of one PaCoRe run on one problem.

    Effective test-time compute (TTC) is the paper's measure: the sum of all
    trajectories' completion tokens over all rounds, failed calls included
    when the server reported tokens for them.

    ``conversation`` is the problem as the run read it (OpenAI-style dicts,
    the last user message the question): every prompt of the run is rebuilt
    from it and the rounds, so a result alone is enough to make training
    episodes (:func:`pacore_graph.rl.episodes_from_results`). It is left out
    of :meth:`to_dict`: a results file keeps it once, as the line's
    ``messages``.
    """

    answer: str
    reasoning: str | None
    rounds: tuple[tuple[Trajectory, ...], ...]
    schedule: tuple[int, ...]
    problem_id: str | None = None
    wall_s: float = 0.0
    model: str | None = None
    preset: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    conversation: tuple[Mapping[str, Any], ...] = ()

    def __post_init__(self) -> None:
        # A checkpoint round trip (msgpack) turns tuples into lists; keep them tuples.
        if type(self.rounds) is not tuple or any(type(r) is not tuple for r in self.rounds):
            object.__setattr__(self, "rounds", tuple(tuple(r) for r in self.rounds))
        if type(self.schedule) is not tuple:
            object.__setattr__(self, "schedule", tuple(self.schedule))
        if type(self.conversation) is not tuple:
            object.__setattr__(self, "conversation", tuple(self.conversation))

    @property
    def final(self) -> Trajectory:
        """The trajectory that gave the answer (the aggregator's choice, if one chose)."""
        chosen = self.extra.get("chosen")
        if chosen:  # any round: online DeepConf's vote may pick a warm-up trace
            for rnd in reversed(self.rounds):
                for t in rnd:
                    if t.id == chosen:
                        return t
        return next((t for t in self.rounds[-1] if not t.failed), self.rounds[-1][0])

    @property
    def ttc_per_round(self) -> tuple[int, ...]:
        return tuple(sum(t.completion_tokens for t in rnd) for rnd in self.rounds)

    @property
    def effective_ttc(self) -> int:
        return sum(self.ttc_per_round)

    @property
    def trajectories(self) -> tuple[Trajectory, ...]:
        return tuple(t for rnd in self.rounds for t in rnd)

    @property
    def failures(self) -> int:
        return sum(t.failed for t in self.trajectories)

    @property
    def truncations(self) -> int:
        return sum(t.truncated for t in self.trajectories)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object ``pacore run --json`` prints."""
        return {
            "problem_id": self.problem_id,
            "answer": self.answer,
            "reasoning": self.reasoning,
            "effective_ttc": self.effective_ttc,
            "ttc_per_round": list(self.ttc_per_round),
            "schedule": list(self.schedule),
            "preset": self.preset,
            "model": self.model,
            "trajectories": len(self.trajectories),
            "failures": self.failures,
            "truncations": self.truncations,
            "wall_s": round(self.wall_s, 4),
            "rounds": [[t.to_dict() for t in rnd] for rnd in self.rounds],
            **({"extra": dict(self.extra)} if self.extra else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PaCoReResult:
        """Rebuild a result from :meth:`to_dict` output (e.g. a results.jsonl line).

        A ``conversation`` key, when the data has one, is read too.
        """
        rounds: Sequence[Sequence[Mapping[str, Any]]] = data["rounds"]
        return cls(
            answer=data.get("answer", ""),
            reasoning=data.get("reasoning"),
            rounds=tuple(tuple(Trajectory.from_dict(t) for t in rnd) for rnd in rounds),
            schedule=tuple(data.get("schedule", [len(r) for r in rounds])),
            problem_id=data.get("problem_id"),
            wall_s=float(data.get("wall_s", 0.0)),
            model=data.get("model"),
            preset=data.get("preset"),
            extra=data.get("extra", {}),
            conversation=tuple(data.get("conversation") or ()),
        )
