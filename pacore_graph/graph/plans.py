"""Round plans: what each explorer of a round is asked, as a part any method can swap.

PaCoRe asks every explorer of round r the same thing: the problem with the
previous round's messages, P(x, M_{r-1}). Other methods ask differently, and
that is the whole difference between them:

- RSA gives each new candidate its own prompt, written from K random
  candidates of the previous population;
- online DeepConf asks its later traces the question again, each with the
  confidence bar its warm-up round set (they stop below it);
- confidence-filtered PaCoRe shows a synthesis round only the most confident
  share of the previous round.

A :class:`RoundPlan` is that difference as a function: from the run's
problem, the rounds so far and the round's index and width
(:class:`RoundInput`) to the round's prompts (:class:`RoundPrompts`). It
returns either **one** prompt, which all K explorers of the round share --
the chat explorer then sends the round as one ``n=K`` request, the plain
path's speed -- or **K** prompts, one per explorer, each with the previous
round's indices it shows (``references``: the message graph's and the
traces' edges) and ``extras`` for its explorer (``ExploreTask.extras``: a
confidence bar, the trajectories an aggregator reads). A plan may be a plain
or an ``async`` function; it must not call a model (it runs in the round
node: explorers are where models are called, traced and retried).

:class:`SynthesisPlan` is PaCoRe's own plan (the paper's prompt and
reference order), and the default of
:func:`~pacore_graph.graph.builder.build_pacore_graph`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from pacore_graph.values.prompts import (
    SYNTHESIS_TEMPLATE,
    ReferenceOrder,
    select_references,
    synthesis_messages,
)
from pacore_graph.values.records import Trajectory

__all__ = [
    "ExplorerPrompt",
    "RoundInput",
    "RoundPlan",
    "RoundPrompts",
    "SynthesisPlan",
    "plan_round",
]

ChatMessages: TypeAlias = tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundInput:
    """What a plan sees: the run's problem, the rounds so far, and the round to plan.

    ``rounds`` are the finished rounds, each sorted by explorer index, their
    messages compacted (a failed trajectory is kept, with ``failed`` set).
    ``final`` is the answer round (the K=1 synthesis of PaCoRe, or the
    aggregator graph's turn). ``width`` is how many explorers the round runs
    (a token budget may have made it narrower than planned).
    """

    problem: ChatMessages
    problem_id: str | None
    round: int
    width: int
    rounds: tuple[tuple[Trajectory, ...], ...]
    final: bool = False

    @property
    def previous(self) -> tuple[Trajectory, ...]:
        """The last finished round (empty for round 0)."""
        return self.rounds[-1] if self.rounds else ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ExplorerPrompt:
    """What one explorer (or all explorers of a round, when shared) is asked.

    ``references`` are the previous round's explorer indices whose messages
    the prompt shows, in prompt order; ``extras`` reach the explorer as
    ``ExploreTask.extras``.
    """

    messages: ChatMessages
    references: tuple[int, ...] = ()
    extras: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # A checkpoint round trip (msgpack) gives lists; keep the tuples.
        if type(self.messages) is not tuple:
            object.__setattr__(self, "messages", tuple(self.messages))
        if type(self.references) is not tuple:
            object.__setattr__(self, "references", tuple(self.references))


@dataclass(frozen=True, slots=True, kw_only=True)
class RoundPrompts:
    """A round's prompts: one shared by its K explorers, or one per explorer.

    ``note``, when given, is kept in the run's ``round_control`` notes
    (``PaCoReResult.extra``), e.g. which references a filter passed on.
    ``reads`` are the reference texts the round reads, for its span (by
    default the messages of every index some prompt references).
    """

    prompts: tuple[ExplorerPrompt, ...]
    note: Mapping[str, Any] | None = None
    reads: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if type(self.prompts) is not tuple:
            object.__setattr__(self, "prompts", tuple(self.prompts))
        if self.reads is not None and type(self.reads) is not tuple:
            object.__setattr__(self, "reads", tuple(self.reads))

    @classmethod
    def shared(
        cls,
        messages: Sequence[Mapping[str, Any]],
        references: Sequence[int] = (),
        **kwargs: Any,
    ) -> RoundPrompts:
        """One prompt for every explorer of the round (sent as one ``n=K`` request)."""
        return cls(
            prompts=(ExplorerPrompt(messages=tuple(messages), references=tuple(references)),),
            **kwargs,
        )

    @property
    def is_shared(self) -> bool:
        return len(self.prompts) == 1

    def prompt_for(self, index: int) -> ExplorerPrompt:
        """Explorer ``index``'s prompt."""
        return self.prompts[0] if len(self.prompts) == 1 else self.prompts[index]


class RoundPlan(Protocol):
    """Plans one round: its prompts from the run so far. A function, plain or ``async``."""

    def __call__(self, round: RoundInput, /) -> RoundPrompts | Awaitable[RoundPrompts]: ...


def _reads(prompts: RoundPrompts, previous: Sequence[Trajectory]) -> tuple[str, ...]:
    by_index = {t.index: t for t in previous}
    seen: dict[int, None] = {}
    for p in prompts.prompts:
        for i in p.references:
            seen.setdefault(i)
    return tuple(by_index[i].message or "" for i in seen if i in by_index)


async def plan_round(plan: RoundPlan | Callable[..., Any], view: RoundInput) -> RoundPrompts:
    """``plan``'s prompts for ``view``, checked: one or ``width`` prompts, known references.

    A plan that answers something else fails the run with a ``TypeError`` or
    ``ValueError`` naming the plan (before any model call of the round).
    """
    found = plan(view)
    if inspect.isawaitable(found):
        found = await found
    name = getattr(plan, "__name__", type(plan).__name__)
    if not isinstance(found, RoundPrompts):
        raise TypeError(f"round plan {name} returned {type(found).__name__}, not RoundPrompts")
    count = len(found.prompts)
    if count not in (1, view.width):
        raise ValueError(
            f"round plan {name} gave {count} prompts for round {view.round} of {view.width} "
            "explorers: give one shared prompt or one per explorer"
        )
    known = {t.index for t in view.previous}
    for p in found.prompts:
        if not p.messages:
            raise ValueError(f"round plan {name} gave an empty prompt for round {view.round}")
        unknown = [i for i in p.references if i not in known]
        if unknown:
            raise ValueError(
                f"round plan {name} references {unknown} in round {view.round}, "
                "which the previous round does not have"
            )
    if found.reads is None:
        found = RoundPrompts(
            prompts=found.prompts, note=found.note, reads=_reads(found, view.previous)
        )
    return found


@dataclass(frozen=True, slots=True)
class SynthesisPlan:
    """PaCoRe's plan: round 0 asks the problem; each later round, P(x, M_{r-1}).

    All K explorers of a round share the prompt (one ``n=K`` request).
    ``template`` is the synthesis prompt (the paper's by default, byte for
    byte); ``shuffle_seed`` and ``order`` choose the references' order
    (:func:`~pacore_graph.values.prompts.select_references`).
    """

    template: str = SYNTHESIS_TEMPLATE
    shuffle_seed: int | None = 42
    order: ReferenceOrder = "public"

    def __call__(self, round: RoundInput, /) -> RoundPrompts:
        if round.round == 0 or not round.rounds:
            return RoundPrompts(prompts=(ExplorerPrompt(messages=round.problem),), reads=())
        refs, texts = select_references(round.previous, self.shuffle_seed, self.order)
        prompt = synthesis_messages(round.problem, texts, self.template)
        return RoundPrompts(
            prompts=(ExplorerPrompt(messages=tuple(prompt), references=refs),),
            reads=tuple(texts),
        )
