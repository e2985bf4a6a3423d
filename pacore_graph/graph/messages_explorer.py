"""Any graph with a ``messages`` state as a part of PaCoRe: an explorer, or the run's aggregator.

A LangGraph developer's agents speak messages: ``create_react_agent(...)``,
``langchain.agents.create_agent(...)``, their own ``StateGraph`` over
``MessagesState``, or a chat model. Such a graph is an explorer *as it is*
(:class:`MessagesExplorer`): it receives the round's prompt as its
``messages`` and whatever it adds is the trajectory, read by
:func:`trajectory_from_messages`:

- the text of its last AI message is the trajectory's ``content`` (the
  answer the compactor reads), its ``additional_kwargs["reasoning_content"]``
  (or ``reasoning``) the trajectory's reasoning;
- tokens are the AI messages' ``usage_metadata``, summed (effective TTC
  counts the output tokens, as for the chat explorer);
- every tool call it made is a :class:`~pacore_graph.values.records.ToolCallRecord`
  with the tool message that answered it (an ``error`` status is the call's
  error);
- the model is the last AI message's ``response_metadata["model_name"]``.

The same reading makes a graph the run's **aggregator**
(:class:`MessagesAggregator`, ``build_pacore_graph(aggregator=graph)``): it
runs once, as the answer round of width 1, with the problem's messages and
the last round's trajectories (``{"messages": [...], "trajectories": (...)}``),
and its last AI message (or an ``"answer"`` string it returns) is the answer.

Each run gets the round's sampling in its config,
``config["configurable"]["pacore_sampling"]`` (``temperature``, ``top_p``,
``max_tokens``, ``seed``, ``model``: :func:`round_sampling` reads it), for a
graph that wants to honour a round's settings; a ``ChatOpenAI`` inside a
graph keeps its own unless the graph passes them on. Explorers of rounds
other than the answer round run with LangGraph's ``nostream`` tag, so a
``messages`` stream carries the answer's tokens only, as for the chat
explorer.

A compiled graph runs as a real subgraph of the node that calls it (its
steps stream with ``subgraphs=True``, it checkpoints in the parent's saver,
an ``interrupt()`` inside it pauses the run and ``Command(resume=...)``
continues it); a chat model or another Runnable is called in the node.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig

from pacore_graph.graph.explorer import ExploreTask
from pacore_graph.graph.plans import ExplorerPrompt, RoundInput, RoundPrompts
from pacore_graph.values.records import ToolCallRecord, Trajectory

__all__ = [
    "PACORE_SAMPLING",
    "MessagesAggregator",
    "MessagesExplorer",
    "round_sampling",
    "trajectory_from_messages",
    "with_round_sampling",
]

#: The ``configurable`` key under which a messages graph finds its round's sampling.
PACORE_SAMPLING = "pacore_sampling"
#: LangGraph's tag that keeps a run's tokens out of ``stream_mode="messages"``.
_NOSTREAM = "nostream"


def round_sampling(config: RunnableConfig | None) -> dict[str, Any] | None:
    """The round's sampling a PaCoRe part was run with (``temperature``, ``top_p``,
    ``max_tokens``, ``seed``, ``model``), or None outside a PaCoRe run."""
    found = ((config or {}).get("configurable") or {}).get(PACORE_SAMPLING)
    return dict(found) if isinstance(found, Mapping) else None


def with_round_sampling(
    config: RunnableConfig, sampling: Mapping[str, Any], *, stream: bool = True
) -> RunnableConfig:
    """``config`` carrying ``sampling`` for the part it runs (``nostream`` unless ``stream``)."""
    configurable = {**(config.get("configurable") or {}), PACORE_SAMPLING: dict(sampling)}
    out: RunnableConfig = {**config, "configurable": configurable}
    if not stream:
        out["tags"] = [*(config.get("tags") or ()), _NOSTREAM]
    return out


def _text(message: BaseMessage) -> str:
    return message.text if isinstance(message.text, str) else str(message.text)


def _reasoning(message: AIMessage) -> str | None:
    extra = message.additional_kwargs or {}
    for key in ("reasoning_content", "reasoning"):
        value = extra.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _usage(message: AIMessage) -> tuple[int, int]:
    usage = message.usage_metadata
    if not usage:
        return 0, 0
    return int(usage.get("input_tokens", 0) or 0), int(usage.get("output_tokens", 0) or 0)


def _tool_calls(produced: Sequence[BaseMessage]) -> tuple[ToolCallRecord, ...]:
    answers = {m.tool_call_id: m for m in produced if isinstance(m, ToolMessage)}
    records: list[ToolCallRecord] = []
    for message in produced:
        if not isinstance(message, AIMessage):
            continue
        for call in message.tool_calls:
            answer = answers.get(call.get("id") or "")
            output = _text(answer) if answer is not None else ""
            failed = answer is None or answer.status == "error"
            records.append(
                ToolCallRecord(
                    name=call["name"],
                    arguments=dict(call.get("args") or {}),
                    output=output,
                    error=(output or "no tool message answered the call") if failed else None,
                )
            )
    return tuple(records)


def trajectory_from_messages(
    task: ExploreTask,
    produced: Sequence[BaseMessage],
    *,
    latency_s: float = 0.0,
    answer: str | None = None,
) -> Trajectory:
    """The trajectory a messages graph's new messages make (see the module docstring).

    ``answer``, when the graph returned one as text, is the content instead
    of the last AI message's. ``ValueError`` when there is no AI message.
    """
    replies = [m for m in produced if isinstance(m, AIMessage)]
    if not replies:
        raise ValueError("the graph added no AI message: nothing to take as its answer")
    last = replies[-1]
    usage = [_usage(m) for m in replies]
    metadata = last.response_metadata or {}
    model = metadata.get("model_name") or metadata.get("model")
    return Trajectory(
        round=task.round,
        index=task.index,
        content=answer if answer is not None else _text(last),
        reasoning=_reasoning(last),
        finish_reason=metadata.get("finish_reason"),
        prompt_tokens=sum(p for p, _ in usage),
        completion_tokens=sum(c for _, c in usage),
        latency_s=latency_s,
        references=task.references,
        tool_calls=_tool_calls(produced),
        model=model if isinstance(model, str) and model else None,
    )


def _is_chat_model(runnable: Any) -> bool:
    return isinstance(runnable, BaseLanguageModel)


def _produced(out: Any, sent: int) -> tuple[list[BaseMessage], str | None]:
    """The messages a run added (after the ``sent`` it was given) and its ``answer`` text."""
    if isinstance(out, BaseMessage):
        return [out], None
    if isinstance(out, str):
        return [AIMessage(out)], None
    if isinstance(out, Mapping):
        answer = out.get("answer")
        messages = out.get("messages")
        if messages is None:
            if isinstance(answer, str):
                return [AIMessage(answer)], answer
            raise TypeError(
                f"the graph returned no 'messages' (keys: {sorted(map(str, out))[:10]})"
            )
        converted = list(convert_to_messages(messages))
        added = converted[sent:] if len(converted) > sent else converted
        return added, answer if isinstance(answer, str) else None
    if isinstance(out, Sequence):
        return list(convert_to_messages(out)), None
    raise TypeError(f"the graph returned {type(out).__name__}, not a messages state")


@dataclass(frozen=True, slots=True)
class MessagesExplorer:
    """A graph (or Runnable, or chat model) with a ``messages`` state, as an explorer.

    ``explorer=create_react_agent(...)`` is wrapped in one of these by the
    builder; wrap it yourself to give it a ``name`` (traces show
    ``invoke_agent {name}``).
    """

    runnable: Any
    name: str = ""

    def __post_init__(self) -> None:
        if not hasattr(self.runnable, "ainvoke"):
            raise TypeError(
                "a messages explorer needs a graph or Runnable (with ainvoke); "
                f"got {self.runnable!r}"
            )
        if not self.name:
            object.__setattr__(
                self, "name", str(getattr(self.runnable, "name", None) or "explorer")
            )

    @property
    def graph(self) -> Any:
        """The compiled graph run as a subgraph (None for a chat model or another Runnable)."""
        from langgraph.pregel import Pregel

        return self.runnable if isinstance(self.runnable, Pregel) else None

    def input_of(self, task: ExploreTask) -> Any:
        """The run's input: the prompt's messages (a chat model gets the list itself)."""
        messages = [dict(m) for m in task.messages]
        return messages if _is_chat_model(self.runnable) else {"messages": messages}

    def trajectory_of(self, task: ExploreTask, out: Any, started: float) -> Trajectory:
        """The trajectory of a finished run (``started`` from ``time.perf_counter()``)."""
        added, answer = _produced(out, len(task.messages))
        return trajectory_from_messages(
            task, added, latency_s=time.perf_counter() - started, answer=answer
        )

    async def run(self, runnable: Any, task: ExploreTask, config: RunnableConfig) -> Trajectory:
        """Run ``runnable`` (this part's, named by the caller for subgraph discovery)."""
        started = time.perf_counter()
        out = await runnable.ainvoke(self.input_of(task), config)
        return self.trajectory_of(task, out, started)


@dataclass(frozen=True, slots=True)
class MessagesAggregator(MessagesExplorer):
    """A graph that reads the last round's trajectories and answers: the run's final step.

    Its input is ``{"messages": <the problem, OpenAI-style dicts>,
    "trajectories": <the last round's records, sorted by index, failed ones
    included>}``; it runs once per run as the answer round (width 1), so its
    record, spans, tokens and failures are those of a synthesis round.
    """

    trajectories_key: str = field(default="trajectories")

    def plan(self, round: RoundInput, /) -> RoundPrompts:
        """The answer round's one prompt: the problem, with the last round for ``extras``."""
        previous = tuple(sorted(round.previous, key=lambda t: t.index))
        return RoundPrompts(
            prompts=(
                ExplorerPrompt(
                    messages=round.problem,
                    references=tuple(t.index for t in previous if not t.failed),
                    extras={self.trajectories_key: previous},
                ),
            ),
            reads=tuple(t.message or "" for t in previous if not t.failed),
        )

    def input_of(self, task: ExploreTask) -> Any:
        return {
            "messages": [dict(m) for m in task.messages],
            self.trajectories_key: tuple(task.extras.get(self.trajectories_key) or ()),
        }
