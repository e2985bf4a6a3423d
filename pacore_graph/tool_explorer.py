"""The tool explorer: a model <-> tool loop per trajectory, as a LangGraph subgraph.

Each explorer of a round runs its own loop: the model answers or calls tools,
tool results go back to the model, until it answers without tool calls, or a
step or token budget runs out. The trajectory records every tool call and
result (``Trajectory.tool_calls``); its ``content`` is the model's final
answer, so compactors pass on the conclusion, never the tool transcript.

Per-trajectory set-up (a workspace copy for a SWE task, the tools bound to
it) and tear-down (a diff, a test run) are hooks of a :class:`ToolSession`,
created fresh for every explorer by a factory, so parallel explorers never
share mutable state.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph

from pacore_graph.explorer import ExploreTask, GraphExplorer, failed_trajectory
from pacore_graph.records import ToolCallRecord, Trajectory
from pacore_graph.tracing import model_step_span, tool_span

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
    task: ExploreTask
    trajectory: Trajectory


@dataclass
class _Loop:
    """Mutable bookkeeping of one trajectory's loop (never shared between explorers)."""

    messages: list[BaseMessage]
    records: list[ToolCallRecord] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    steps: int = 0


def _usage(message: AIMessage) -> tuple[int, int]:
    usage = message.usage_metadata
    if usage is None:
        return 0, 0
    return int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))


async def _call_tool(tool: BaseTool | None, name: str, args: Mapping[str, Any]) -> ToolCallRecord:
    started = time.perf_counter()
    with tool_span(name, args) as span:
        if tool is None:
            error = f"unknown tool {name!r}"
            if span is not None:
                span.set_attribute("error.type", "unknown_tool")
            return ToolCallRecord(name=name, arguments=args, output=error, error=error)
        try:
            output = await tool.ainvoke(dict(args))
            text = output if isinstance(output, str) else json.dumps(output, default=str)
            return ToolCallRecord(
                name=name, arguments=args, output=text, latency_s=time.perf_counter() - started
            )
        except Exception as exc:  # a tool error is shown to the model, not raised
            error = f"{type(exc).__name__}: {exc}"
            if span is not None:
                span.set_attribute("error.type", type(exc).__name__)
            return ToolCallRecord(
                name=name,
                arguments=args,
                output=f"error: {error}",
                error=error,
                latency_s=time.perf_counter() - started,
            )


def build_tool_explorer(
    chat_model: BaseChatModel,
    session_factory: ToolSessionFactory,
    *,
    max_steps: int = 8,
    max_completion_tokens: int | None = None,
    system_prompt: str | None = None,
    name: str = "tool_explorer",
) -> GraphExplorer:
    """A :class:`~pacore_graph.explorer.GraphExplorer` running a model <-> tool loop.

    ``chat_model`` must support ``bind_tools`` (e.g. the ``ChatOpenAI`` from
    :func:`pacore_graph.langchain_client.make_chat_model`). ``max_steps`` bounds model
    calls per trajectory; ``max_completion_tokens`` bounds the tokens they
    generate in total. When a budget runs out the last answer stands and the
    trajectory's ``finish_reason`` is ``"length"`` (flagged as truncated).
    """
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    if not hasattr(chat_model, "bind_tools"):
        raise TypeError("the tool explorer needs a chat model that supports bind_tools()")
    model_name = str(
        getattr(chat_model, "model_name", None) or getattr(chat_model, "model", None) or "model"
    )

    async def run(state: ToolExplorerState, config: RunnableConfig) -> dict[str, Any]:
        task = state["task"]
        started = time.perf_counter()
        session = await session_factory(task)
        try:
            tools = {t.name: t for t in session.tools}
            model = chat_model.bind_tools(list(session.tools))
            prompt = list(convert_to_messages([dict(m) for m in task.messages]))
            if system_prompt and not any(m.type == "system" for m in prompt):
                prompt.insert(
                    0, convert_to_messages([{"role": "system", "content": system_prompt}])[0]
                )
            loop = _Loop(messages=prompt)
            reply: AIMessage | None = None
            while loop.steps < max_steps:
                loop.steps += 1
                try:
                    with model_step_span(model_name) as step_span:
                        answer = await model.ainvoke(loop.messages, config)
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
                except Exception as exc:
                    return {
                        "trajectory": replace(
                            failed_trajectory(task, exc, time.perf_counter() - started),
                            tool_calls=tuple(loop.records),
                            completion_tokens=loop.completion_tokens,
                        )
                    }
                if not isinstance(answer, AIMessage):
                    raise TypeError(f"chat model returned {type(answer).__name__}, not AIMessage")
                reply = answer
                p, c = _usage(reply)
                loop.prompt_tokens += p
                loop.completion_tokens += c
                meta = reply.response_metadata or {}
                loop.finish_reason = meta.get("finish_reason")
                if reply.additional_kwargs.get("reasoning_content"):
                    loop.reasoning.append(str(reply.additional_kwargs["reasoning_content"]))
                loop.messages.append(reply)
                if not reply.tool_calls:
                    break
                calls = await asyncio.gather(
                    *(
                        _call_tool(tools.get(tc["name"]), tc["name"], tc["args"])
                        for tc in reply.tool_calls
                    )
                )
                for tc, record in zip(reply.tool_calls, calls, strict=True):
                    loop.records.append(record)
                    loop.messages.append(
                        ToolMessage(content=record.output, tool_call_id=tc["id"] or "")
                    )
                if (
                    max_completion_tokens is not None
                    and loop.completion_tokens >= max_completion_tokens
                ):
                    loop.finish_reason = "length"
                    break
            else:
                if reply is not None and reply.tool_calls:
                    loop.finish_reason = "length"  # out of steps while still calling tools
            content = reply.text if reply is not None else ""
            trajectory = Trajectory(
                round=task.round,
                index=task.index,
                content=content,
                reasoning="\n".join(loop.reasoning) or None,
                finish_reason=loop.finish_reason,
                prompt_tokens=loop.prompt_tokens,
                completion_tokens=loop.completion_tokens,
                latency_s=time.perf_counter() - started,
                references=task.references,
                tool_calls=tuple(loop.records),
            )
            return {"trajectory": await session.finish(trajectory)}
        finally:
            await session.close()

    graph = StateGraph(ToolExplorerState)
    graph.add_node("loop", run)
    graph.add_edge(START, "loop")
    graph.add_edge("loop", END)
    return GraphExplorer(graph.compile(name=name))
