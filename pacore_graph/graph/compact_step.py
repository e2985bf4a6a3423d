"""Compaction as a part: a function, an ``async`` function, a ``Compactor`` or an LLM.

m = C(w) is the message one trajectory passes to the next round. What ``C``
is, is the user's choice (``build_pacore_graph(compactor=...)``):

- a built-in or registered name (``"conclusion"``, ``"answer"``, ``"budget:N"``),
  or an object with ``compact(trajectory) -> str``
  (:class:`~pacore_graph.values.compaction.Compactor`);
- any function ``(Trajectory) -> str``, or an ``async`` one: the compactors
  of a round's trajectories then run concurrently (an async compactor may
  call a service);
- a LangChain chat model or Runnable (:class:`LLMCompactor`): an LLM that
  rewrites each trajectory into its message. Its tokens are not effective
  TTC (they are not the explorers' reasoning, as a judge's are not): each
  trajectory keeps them in ``artifacts["compaction"]`` and the result sums
  them in ``extra["compaction_tokens"]``.

:func:`compact_step` turns each into one :class:`CompactStep`, which the
compaction node runs. A plain function or ``Compactor`` runs inline in a loop
(the plain path pays nothing for the others). Whatever a compactor raises
fails that trajectory only, recorded like an explorer's failure
(``error`` ``"compactor NAME: KeyError: ..."``, no message): the round
fails only if every trajectory failed.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig

from pacore_graph.values.answers import split_conclusion
from pacore_graph.values.records import Trajectory

__all__ = [
    "COMPACTION_ARTIFACT",
    "DEFAULT_COMPACTION_INSTRUCTION",
    "CompactStep",
    "LLMCompactor",
    "compact_step",
    "compaction_tokens",
]

#: The key of a trajectory's ``artifacts`` where an LLM compactor's tokens are kept.
COMPACTION_ARTIFACT = "compaction"

DEFAULT_COMPACTION_INSTRUCTION = (
    "You condense one solver's attempt at a problem into the message other solvers will "
    "read next. Keep its final answer exactly as stated, the key steps that justify it, "
    "and any doubt it raised; drop false starts and repetition. Answer with the message "
    "only."
)

OneCompaction = Callable[
    [Trajectory, Sequence[Mapping[str, Any]], RunnableConfig], Awaitable["Compacted"]
]


@dataclass(frozen=True, slots=True)
class Compacted:
    """One compaction's message and what it cost (an LLM compactor's tokens)."""

    message: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


def _question(problem: Sequence[Mapping[str, Any]]) -> str:
    for message in reversed(problem):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


def _reply_text(out: Any) -> tuple[str, int, int]:
    """The text an LLM compactor answered, with its tokens (from ``usage_metadata``)."""
    if isinstance(out, str):
        return out, 0, 0
    if isinstance(out, Mapping):
        answer = out.get("answer")
        if isinstance(answer, str):
            return answer, 0, 0
        messages = out.get("messages")
        if isinstance(messages, Sequence) and messages:
            out = messages[-1]
    if isinstance(out, BaseMessage):
        usage = out.usage_metadata if isinstance(out, AIMessage) else None
        text = out.text if isinstance(out.text, str) else str(out.text)
        if not usage:
            return text, 0, 0
        return text, int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))
    raise TypeError(f"the compactor answered {type(out).__name__}, not a message or text")


@dataclass(frozen=True, slots=True)
class LLMCompactor:
    """An LLM that rewrites each trajectory into the message the next round reads.

    ``model`` is a LangChain chat model (called with the messages) or any
    Runnable (called with ``{"messages": [...]}``; it may answer a message,
    a messages state or text). It is asked with ``instruction`` as the
    system message and the problem and the trajectory's conclusion (the
    text after its reasoning) as the user's.
    """

    model: Any
    instruction: str = DEFAULT_COMPACTION_INSTRUCTION
    name: str = "llm"

    def __post_init__(self) -> None:
        if not hasattr(self.model, "ainvoke"):
            raise TypeError(f"an LLM compactor needs a chat model or Runnable; got {self.model!r}")

    def messages(
        self, trajectory: Trajectory, problem: Sequence[Mapping[str, Any]]
    ) -> list[dict[str, str]]:
        """What the model is asked for one trajectory."""
        text = split_conclusion(trajectory.content) or trajectory.content
        return [
            {"role": "system", "content": self.instruction},
            {"role": "user", "content": f"Problem:\n{_question(problem)}\n\nAttempt:\n{text}"},
        ]

    async def acompact(
        self,
        trajectory: Trajectory,
        problem: Sequence[Mapping[str, Any]],
        config: RunnableConfig,
    ) -> Compacted:
        messages = self.messages(trajectory, problem)
        given = messages if isinstance(self.model, BaseLanguageModel) else {"messages": messages}
        text, prompt_tokens, completion_tokens = _reply_text(
            await self.model.ainvoke(given, config)
        )
        return Compacted(text, prompt_tokens, completion_tokens)


def _failed(t: Trajectory, name: str, exc: BaseException) -> Trajectory:
    return replace(t, message=None, error=f"compactor {name}: {type(exc).__name__}: {exc}")


def _checked(text: Any, name: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"returned {type(text).__name__}, not text")
    return text


@dataclass(frozen=True, slots=True)
class CompactStep:
    """A compactor as the compaction node runs it: inline (``sync``) or concurrently (``one``)."""

    name: str
    sync: Callable[[Trajectory], str] | None = None
    one: OneCompaction | None = None

    async def run(
        self,
        trajectories: Sequence[Trajectory],
        problem: Sequence[Mapping[str, Any]],
        config: RunnableConfig,
    ) -> tuple[Trajectory, ...]:
        """Every successful trajectory with its message; a compactor's failure fails it."""
        if self.sync is not None:
            return tuple(self._inline(t) for t in trajectories)
        one = self.one
        assert one is not None

        async def compact(t: Trajectory) -> Trajectory:
            if t.failed:
                return t
            try:
                done = await one(t, problem, config)
                message = _checked(done.message, self.name)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                return _failed(t, self.name, exc)
            if not done.prompt_tokens and not done.completion_tokens:
                return replace(t, message=message)
            cost = {
                "prompt_tokens": done.prompt_tokens,
                "completion_tokens": done.completion_tokens,
            }
            return replace(t, message=message, artifacts={**t.artifacts, COMPACTION_ARTIFACT: cost})

        return tuple(await asyncio.gather(*(compact(t) for t in trajectories)))

    def _inline(self, t: Trajectory) -> Trajectory:
        if t.failed:
            return t
        sync = self.sync
        assert sync is not None
        try:
            return replace(t, message=_checked(sync(t), self.name))
        except Exception as exc:
            return _failed(t, self.name, exc)


def _name_of(compactor: Any) -> str:
    name = getattr(compactor, "name", None) or getattr(compactor, "__name__", None)
    return str(name or type(compactor).__name__)


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - an object whose __call__ is async
    )


def compact_step(compactor: Any) -> CompactStep:
    """The :class:`CompactStep` that runs ``compactor`` (see the module docstring).

    Names are resolved before (the builder's ``resolve_compactor``); a
    ``TypeError`` names what is not a compactor.
    """
    if isinstance(compactor, CompactStep):
        return compactor
    if isinstance(compactor, LLMCompactor):
        llm = compactor

        async def by_llm(
            t: Trajectory, problem: Sequence[Mapping[str, Any]], config: RunnableConfig
        ) -> Compacted:
            return await llm.acompact(t, problem, config)

        return CompactStep(name=llm.name, one=by_llm)
    if isinstance(compactor, Runnable):
        return compact_step(LLMCompactor(compactor, name=_name_of(compactor)))
    method = getattr(compactor, "compact", None)
    fn = method if callable(method) else compactor
    if not callable(fn) or isinstance(compactor, type):
        raise TypeError(
            f"compactor {compactor!r} is not a compactor: give a function (Trajectory) -> str "
            "(or async), an object with compact(trajectory), a chat model, or a name"
        )
    name = _name_of(compactor)
    if not _is_async(fn):
        return CompactStep(name=name, sync=fn)

    async def by_function(
        t: Trajectory, problem: Sequence[Mapping[str, Any]], config: RunnableConfig
    ) -> Compacted:
        return Compacted(await fn(t))

    return CompactStep(name=name, one=by_function)


def compaction_tokens(rounds: Sequence[Sequence[Trajectory]]) -> dict[str, int] | None:
    """An LLM compactor's tokens over a run (None when no compaction cost any)."""
    prompt = completion = 0
    for rnd in rounds:
        for t in rnd:
            cost = t.artifacts.get(COMPACTION_ARTIFACT) if t.artifacts else None
            if isinstance(cost, Mapping):
                prompt += int(cost.get("prompt_tokens", 0))
                completion += int(cost.get("completion_tokens", 0))
    if not prompt and not completion:
        return None
    return {"prompt_tokens": prompt, "completion_tokens": completion}
