"""The tool explorer: a model <-> tool loop per trajectory, as a LangGraph subgraph.

Each explorer of a round runs its own loop: the model answers or calls tools,
tool results go back to the model, until it answers without tool calls, or a
step or token budget runs out. The loop is a graph, not a ``while`` in one
node, so its steps stream (``astream(subgraphs=True)``), are checkpointed,
and show in ``get_graph(xray=True)``::

    START -> setup -> model --(tool calls, within limits)--> tools -> model ...
                        +--(answer, error, or out of steps/tokens)--> finish -> END

``model`` is one chat call with the session's tools bound and the run's
sampling settings; ``tools`` runs LangGraph's ``ToolNode`` (tool errors go
back to the model as messages); the step and token limits live in the
state, so a resumed loop keeps counting where it stopped. The trajectory records every tool call and
result (``Trajectory.tool_calls``); its ``content`` is the model's final
answer, so compactors pass on the conclusion, never the tool transcript.

Per-trajectory set-up (a workspace copy for a SWE task, the tools bound to
it) and tear-down (a diff, a test run) are hooks of a :class:`ToolSession`,
created fresh for every explorer by a factory, so parallel explorers never
share mutable state.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from typing_extensions import TypedDict

from pacore_graph.graph.explorer import ExploreTask, GraphExplorer, failed_trajectory
from pacore_graph.otel.spans import model_step_span, record_call_error, tool_span
from pacore_graph.values.records import ToolCallRecord, Trajectory

__all__ = [
    "ToolExplorerState",
    "ToolSession",
    "ToolSessionFactory",
    "build_tool_explorer",
    "static_tools",
]


class ToolSession(Protocol):
    """One explorer's tools and workspace, alive for one trajectory."""

    @property
    def tools(self) -> Sequence[BaseTool]:
        """The tools the model may call in this trajectory."""
        ...

    async def finish(self, trajectory: Trajectory) -> Trajectory:
        """Last word on the trajectory (e.g. append a diff and a test summary)."""
        ...

    async def close(self) -> None:
        """Release the workspace; called even when the loop failed."""
        ...


ToolSessionFactory = Callable[[ExploreTask], Awaitable[ToolSession]]


@dataclass
class _StaticSession:
    tools: Sequence[BaseTool]

    async def finish(self, trajectory: Trajectory) -> Trajectory:
        return trajectory

    async def close(self) -> None:
        return None


def static_tools(tools: Sequence[BaseTool]) -> ToolSessionFactory:
    """A session factory for tools that need no per-trajectory set-up."""

    async def factory(task: ExploreTask) -> ToolSession:
        return _StaticSession(tools)

    return factory


class ToolExplorerState(TypedDict, total=False):
    """One trajectory's loop: the task, the conversation so far, counters and limits."""

    task: ExploreTask
    messages: Annotated[list[AnyMessage], add_messages]
    steps: int
    max_steps: int
    max_completion_tokens: int | None
    prompt_tokens: int
    completion_tokens: int
    reasoning: list[str]
    finish_reason: str | None
    tool_calls: Annotated[list[ToolCallRecord], operator.add]
    error: str | None
    started: float
    trajectory: Trajectory


def _usage(message: AIMessage) -> tuple[int, int]:
    usage = message.usage_metadata
    if usage is None:
        return 0, 0
    return int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))


def _answered_by(replies: Sequence[AIMessage]) -> str | None:
    """The model name the last reply's metadata gives (``model_name``, as ChatOpenAI sets it)."""
    for reply in reversed(replies):
        name = (reply.response_metadata or {}).get("model_name")
        if isinstance(name, str) and name:
            return name
    return None


def _key(task: ExploreTask) -> tuple[str, int, int]:
    return (task.run_id, task.round, task.index)


@dataclass
class _Live:
    """A trajectory's open session and the ToolNode over its tools (never checkpointed)."""

    session: ToolSession
    tool_node: ToolNode
    records: dict[str, ToolCallRecord] = field(default_factory=dict)


def _sampling_kwargs(task: ExploreTask) -> dict[str, Any]:
    """The run's sampling settings as chat-model call arguments."""
    kwargs: dict[str, Any] = {}
    if task.params is not None:
        kwargs["temperature"] = task.params.temperature
        kwargs["top_p"] = task.params.top_p
        if task.params.max_tokens is not None:
            kwargs["max_tokens"] = task.params.max_tokens
        if task.params.model is not None:
            kwargs["model"] = task.params.model  # the round's own model
    if task.seed is not None:
        kwargs["seed"] = task.seed
    return kwargs


class _ToolLoop:
    """The loop's nodes; sessions live in ``self.live`` while their trajectory runs."""

    def __init__(
        self,
        chat_model: BaseChatModel,
        session_factory: ToolSessionFactory,
        *,
        max_steps: int,
        max_completion_tokens: int | None,
        system_prompt: str | None,
    ) -> None:
        self.chat_model = chat_model
        self.session_factory = session_factory
        self.max_steps = max_steps
        self.max_completion_tokens = max_completion_tokens
        self.system_prompt = system_prompt
        self.model_name = str(
            getattr(chat_model, "model_name", None) or getattr(chat_model, "model", None) or "model"
        )
        self.live: dict[tuple[str, int, int], _Live] = {}

    async def _live(self, task: ExploreTask) -> _Live:
        live = self.live.get(_key(task))
        if live is None:  # first step, or a loop resumed from a checkpoint
            session = await self.session_factory(task)
            live = _Live(session=session, tool_node=ToolNode([], handle_tool_errors=True))
            live.tool_node = ToolNode(
                list(session.tools), handle_tool_errors=True, awrap_tool_call=self._traced(live)
            )
            self.live[_key(task)] = live
        return live

    async def release(self, task: ExploreTask) -> None:
        """Close the trajectory's session (its workspace); safe to call twice."""
        live = self.live.pop(_key(task), None)
        if live is not None:
            await live.session.close()

    def _traced(self, live: _Live) -> Any:
        async def wrap(request: Any, execute: Any) -> Any:
            call = request.tool_call
            name, args = call["name"], call.get("args") or {}
            started = time.perf_counter()
            with tool_span(name, args) as span:
                result = await execute(request)
                if isinstance(result, ToolMessage):
                    failed = result.status == "error" or request.tool is None
                    text = str(result.text)
                    error: str | None = text if failed else None
                    if request.tool is None:
                        error = f"unknown tool {name!r}"
                    if error is not None and span is not None:
                        kind = "unknown_tool" if request.tool is None else "tool_error"
                        span.set_attribute("error.type", kind)
                    live.records[call.get("id") or ""] = ToolCallRecord(
                        name=name,
                        arguments=args,
                        output=text,
                        error=error,
                        latency_s=time.perf_counter() - started,
                    )
            return result

        return wrap

    # ------------------------------------------------------------------ nodes

    async def setup(self, state: ToolExplorerState) -> dict[str, Any]:
        task = state["task"]
        await self._live(task)
        prompt = list(convert_to_messages([dict(m) for m in task.messages]))
        if self.system_prompt and not any(m.type == "system" for m in prompt):
            prompt.insert(0, SystemMessage(self.system_prompt))
        return {
            "messages": prompt,
            "steps": 0,
            "max_steps": self.max_steps,
            "max_completion_tokens": self.max_completion_tokens,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "reasoning": [],
            "finish_reason": None,
            "error": None,
            "started": time.time(),
        }

    async def model(self, state: ToolExplorerState, config: RunnableConfig) -> dict[str, Any]:
        task = state["task"]
        live = await self._live(task)
        model = self.chat_model.bind_tools(list(live.session.tools))
        kwargs = _sampling_kwargs(task)
        if kwargs:
            model = model.bind(**kwargs)
        steps = state.get("steps", 0) + 1
        try:
            model_name = task.params.model if task.params is not None else None
            with model_step_span(model_name or self.model_name) as step_span:
                if step_span is not None and task.seed is not None:
                    step_span.set_attribute("gen_ai.request.seed", task.seed)
                answer = await model.ainvoke(state["messages"], config)
                if step_span is not None and isinstance(answer, AIMessage):
                    p_tok, c_tok = _usage(answer)
                    step_span.set_attributes(
                        {
                            "gen_ai.usage.input_tokens": p_tok,
                            "gen_ai.usage.output_tokens": c_tok,
                            "gen_ai.response.finish_reasons": [
                                str((answer.response_metadata or {}).get("finish_reason"))
                            ],
                        }
                    )
        except Exception as exc:  # recorded as a failed trajectory, not raised
            # The explorer span's error.type: the call's status or kind, as a
            # plain explorer's (the step span got its own in model_step_span).
            record_call_error(exc)
            return {"steps": steps, "error": f"{type(exc).__name__}: {exc}"}
        if not isinstance(answer, AIMessage):
            raise TypeError(f"chat model returned {type(answer).__name__}, not AIMessage")
        p, c = _usage(answer)
        reasoning = list(state.get("reasoning") or [])
        if answer.additional_kwargs.get("reasoning_content"):
            reasoning.append(str(answer.additional_kwargs["reasoning_content"]))
        return {
            "messages": [answer],
            "steps": steps,
            "prompt_tokens": state.get("prompt_tokens", 0) + p,
            "completion_tokens": state.get("completion_tokens", 0) + c,
            "reasoning": reasoning,
            "finish_reason": (answer.response_metadata or {}).get("finish_reason"),
        }

    def after_model(self, state: ToolExplorerState) -> str:
        last = state["messages"][-1] if state.get("messages") else None
        if state.get("error") or not isinstance(last, AIMessage) or not last.tool_calls:
            return "finish"
        return "tools"

    async def tools(self, state: ToolExplorerState, config: RunnableConfig) -> dict[str, Any]:
        task = state["task"]
        live = await self._live(task)
        out = await live.tool_node.ainvoke({"messages": state["messages"]}, config)
        messages = out["messages"] if isinstance(out, dict) else out
        last = state["messages"][-1]
        calls = last.tool_calls if isinstance(last, AIMessage) else []
        records = [
            live.records.pop(
                tc.get("id") or "",
                ToolCallRecord(name=tc["name"], arguments=tc.get("args") or {}, output=""),
            )
            for tc in calls
        ]
        update: dict[str, Any] = {"messages": messages, "tool_calls": records}
        budget = state.get("max_completion_tokens")
        if budget is not None and state.get("completion_tokens", 0) >= budget:
            update["finish_reason"] = "length"
        elif state.get("steps", 0) >= state.get("max_steps", self.max_steps):
            update["finish_reason"] = "length"  # out of steps while still calling tools
        return update

    def after_tools(self, state: ToolExplorerState) -> str:
        budget = state.get("max_completion_tokens")
        if budget is not None and state.get("completion_tokens", 0) >= budget:
            return "finish"
        if state.get("steps", 0) >= state.get("max_steps", self.max_steps):
            return "finish"
        return "model"

    async def finish(self, state: ToolExplorerState) -> dict[str, Any]:
        task = state["task"]
        latency = time.time() - state.get("started", time.time())
        records = tuple(state.get("tool_calls") or ())
        try:
            if state.get("error"):
                trajectory = replace(
                    failed_trajectory(task, state["error"] or "", latency),
                    tool_calls=records,
                    completion_tokens=state.get("completion_tokens", 0),
                )
                return {"trajectory": trajectory}
            replies = [m for m in state.get("messages") or () if isinstance(m, AIMessage)]
            trajectory = Trajectory(
                round=task.round,
                index=task.index,
                content=replies[-1].text if replies else "",
                reasoning="\n".join(state.get("reasoning") or ()) or None,
                finish_reason=state.get("finish_reason"),
                prompt_tokens=state.get("prompt_tokens", 0),
                completion_tokens=state.get("completion_tokens", 0),
                latency_s=latency,
                references=task.references,
                tool_calls=records,
                model=_answered_by(replies)
                or (task.params.model if task.params is not None else None)
                or self.model_name,
            )
            live = await self._live(task)
            return {"trajectory": await live.session.finish(trajectory)}
        finally:
            await self.release(task)


def build_tool_explorer(
    chat_model: BaseChatModel,
    session_factory: ToolSessionFactory,
    *,
    max_steps: int = 8,
    max_completion_tokens: int | None = None,
    system_prompt: str | None = None,
    name: str = "tool_explorer",
) -> GraphExplorer:
    """A :class:`~pacore_graph.graph.explorer.GraphExplorer` running a model <-> tool loop graph.

    ``chat_model`` must support ``bind_tools`` (e.g. the ``ChatOpenAI`` from
    :func:`pacore_graph.llm.langchain_client.make_chat_model`). ``max_steps`` bounds model
    calls per trajectory; ``max_completion_tokens`` bounds the tokens they
    generate in total. When a budget runs out the last answer stands and the
    trajectory's ``finish_reason`` is ``"length"`` (flagged as truncated).
    Each call uses the run's sampling settings and the explorer's seed.
    """
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    if not hasattr(chat_model, "bind_tools"):
        raise TypeError("the tool explorer needs a chat model that supports bind_tools()")
    loop = _ToolLoop(
        chat_model,
        session_factory,
        max_steps=max_steps,
        max_completion_tokens=max_completion_tokens,
        system_prompt=system_prompt,
    )
    graph = StateGraph(ToolExplorerState)
    graph.add_node("setup", loop.setup)
    graph.add_node("model", loop.model)
    graph.add_node("tools", loop.tools)
    graph.add_node("finish", loop.finish)
    graph.add_edge(START, "setup")
    graph.add_edge("setup", "model")
    graph.add_conditional_edges("model", loop.after_model, ["tools", "finish"])
    graph.add_conditional_edges("tools", loop.after_tools, ["model", "finish"])
    graph.add_edge("finish", END)
    return GraphExplorer(graph.compile(name=name), release=loop.release)
