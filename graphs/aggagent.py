"""An aggregator agent: a model that reads the last round's trajectories with tools, then answers.

PaCoRe's last step is a K=1 synthesis that reads every message of the last
round in one prompt; a vote reads only their answers. AggAgent (Lee, Yen,
Ye, Chen, "Agentic Aggregation for Parallel Scaling of Long-Horizon Agentic
Tasks", arXiv 2604.11753, Princeton, April 2026) does neither: it treats the
N trajectories as an environment and gives the aggregating model tools to
inspect them on demand (survey the answers, search for a claim, read the
parts that decide), so its cost stays one agent rollout however long the
trajectories are, and it can still check the reasoning behind each answer.
This module is that idea as a LangGraph graph for this project; the system
prompt below is our own text, written from the paper's description (its
method: survey the answers first, then search and read where the
trajectories disagree, verify, and answer self-contained), not the paper's
prompt.

The graph follows the aggregator-graph contract (``docs/methods.md``):

- input ``{"messages": [the problem conversation], "trajectories": (the last
  round's Trajectory records, failed ones included)}``;
- output ``{"messages": [...]}``: the conversation, then the agent's own
  AI and tool messages; the answer is the last AI message's text, its
  ``usage_metadata`` the call's tokens, ``additional_kwargs["reasoning_content"]``
  its reasoning;
- the round's sampling, when the caller gives it as
  ``config["configurable"]["pacore_sampling"]`` (a dict of
  :class:`~pacore_graph.settings.config.SamplingParams` fields), is the
  agent's; otherwise the ``sampling`` it was built with;
- a model call that fails for good raises :class:`AggregatorAgentError`.

Inside, the loop is the project's tool explorer
(:func:`~pacore_graph.graph.tool_explorer.build_tool_explorer`: model <->
``ToolNode``, bounded steps and tokens, ``chat``/``execute_tool`` spans, tool
calls recorded) over :class:`~pacore_graph.llm.client_chat_model.ClientChatModel`,
so every call goes through the run's own client: its retries, reply caps,
call deadline, limiter and token accounting. The tools are
:mod:`pacore_graph.tools.trajectories` (list, read by range, search; every
result bounded). ``max_tool_steps`` bounds the model calls that may use
tools; a model still calling tools then is asked once more, without tools,
for its answer. A model that answers at once (no tool call) just answers.

:func:`build_aggregator_agent` compiles it; :func:`build_aggagent_graph` is
the ``aggagent:N`` method: ``build_pacore_graph`` with one explorer round of
width N and this agent as its ``aggregator``, so the agent's step is the
run's answer round (width 1) with a synthesis round's record, spans,
progress events, streaming and resume.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    HumanMessage,
    convert_to_openai_messages,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from typing_extensions import TypedDict

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.errors import PaCoReError
from pacore_graph.graph.builder import build_pacore_graph
from pacore_graph.graph.explorer import ExploreTask
from pacore_graph.graph.tool_explorer import ToolSession, build_tool_explorer
from pacore_graph.llm.client_chat_model import ClientChatModel
from pacore_graph.llm.complete_only import chat_client
from pacore_graph.llm.protocols import ChatClient
from pacore_graph.otel.spans import TraceOptions, model_step_span
from pacore_graph.settings.config import PaCoReConfig, SamplingParams
from pacore_graph.settings.request_limits import RequestLimits
from pacore_graph.tools.trajectories import TrajectoryToolLimits, make_trajectory_tools
from pacore_graph.values.compaction import DEFAULT_COMPACTOR, Compactor
from pacore_graph.values.compactor_registry import CompactorRegistry
from pacore_graph.values.prompts import last_user_index
from pacore_graph.values.records import Trajectory
from pacore_graph.values.seeds import explorer_seed

__all__ = [
    "AGGAGENT_SYSTEM_PROMPT",
    "DEFAULT_MAX_TOOL_STEPS",
    "FINAL_NOTE",
    "SAMPLING_KEY",
    "AggAgentInput",
    "AggAgentOutput",
    "AggAgentState",
    "AggregatorAgentError",
    "agent_prompt",
    "build_aggagent_graph",
    "build_aggregator_agent",
    "run_sampling",
]

#: Where a caller puts the round's sampling (a dict) in ``config["configurable"]``.
SAMPLING_KEY = "pacore_sampling"

#: Model calls that may use tools before the agent must answer.
DEFAULT_MAX_TOOL_STEPS = 6

AGGAGENT_SYSTEM_PROMPT = """\
You aggregate a parallel reasoning run. Several independent attempts at the same problem \
(trajectories) have already been written. You do not see them yet: inspect them with your \
tools, then give the best answer to the problem yourself.

Your tools:
- list_trajectories: each trajectory's index, length, the answer it commits to and whether \
it failed, after a tally of the answers. Start with it.
- search_trajectories: where a word, a number or a regular expression occurs across the \
trajectories, with the text around it. Use it to find where a value or a claim comes from.
- read_trajectory: a range of one trajectory, by characters or lines. Read the steps that \
decide between competing answers.

How to work:
1. List the trajectories and see where they agree and where they part.
2. Where they disagree, do not just take the most common answer: find the step where the \
attempts part (search for the competing values), read it, and check that reasoning and its \
arithmetic yourself. One sound derivation outweighs many copies of the same mistake.
3. If no attempt is right throughout, combine the correct parts and repair the error.
4. Make few, targeted tool calls: your steps are limited.

When you are done, reply without calling a tool. That reply is the final answer the user \
sees: a self-contained solution to the problem that does not mention trajectories, attempts \
or tools, ending with the final answer in the form the problem asks for."""

#: Sent (as a user turn, with no tools offered) when the agent used its tool steps.
FINAL_NOTE = (
    "You have used all your tool steps. Reply now, without calling a tool, with your final "
    "solution, from what you have read."
)


class AggregatorAgentError(PaCoReError):
    """The aggregator agent could not answer (its model call failed for good)."""


class AggAgentInput(TypedDict):
    """The contract's input: the problem conversation and the last round's trajectories."""

    messages: Annotated[list[AnyMessage], add_messages]
    trajectories: Sequence[Trajectory]


class AggAgentOutput(TypedDict):
    """The contract's output: the conversation with the agent's messages appended."""

    messages: Annotated[list[AnyMessage], add_messages]


class AggAgentState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    trajectories: Sequence[Trajectory]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b.get("text", "") for b in content if isinstance(b, Mapping) and b.get("type") == "text"
        )
    return "" if content is None else str(content)


def agent_prompt(
    conversation: Sequence[Any], trajectories: Sequence[Trajectory], system_prompt: str
) -> tuple[dict[str, Any], ...]:
    """The agent's opening messages: its instructions, earlier turns, then the problem.

    The conversation's last user message is the problem (as for PaCoRe's
    synthesis); earlier non-system turns stay before it, and the
    conversation's own system instructions travel with the problem (one
    system message, the agent's, opens the prompt). ValueError when there is
    no user message.
    """
    converted = convert_to_openai_messages(list(conversation))
    convo = [converted] if isinstance(converted, dict) else list(converted)
    last = last_user_index(convo)
    problem = _text(convo[last].get("content")).strip()
    if not problem:
        raise ValueError("empty problem: the last user message has no text")
    instructions = [
        _text(m.get("content")).strip() for m in convo if m.get("role") in ("system", "developer")
    ]
    earlier = [
        {"role": m["role"], "content": _text(m.get("content"))}
        for m in convo[:last]
        if m.get("role") in ("user", "assistant")
    ]
    failed = sum(t.failed for t in trajectories)
    given = "\n\n".join(i for i in instructions if i)
    text = f"Problem:\n{problem}\n\n"
    if given:
        text += f"Instructions that came with the problem:\n{given}\n\n"
    text += (
        f"{len(trajectories)} independent attempts at this problem are open to your tools "
        f"({failed} of them failed and have no text). Inspect them, then reply with your "
        "solution."
    )
    return (
        {"role": "system", "content": system_prompt},
        *earlier,
        {"role": "user", "content": text},
    )


def _given_sampling(config: RunnableConfig | None) -> Mapping[str, Any] | None:
    given = ((config or {}).get("configurable") or {}).get(SAMPLING_KEY)
    return given if isinstance(given, Mapping) else None


def run_sampling(config: RunnableConfig | None, default: SamplingParams) -> SamplingParams:
    """The round's sampling from the config (the contract's dict), else ``default``.

    Known fields only (the dict names the round's ``model`` too, sent as the
    request's model); no log-probabilities: the agent's calls are read for
    their text. The dict's ``seed`` is the agent's call's own seed, as PaCoRe
    gives each explorer its own.
    """
    given = _given_sampling(config)
    if given is None:
        return default
    fields = {k: v for k, v in given.items() if k in SamplingParams.model_fields}
    fields["logprobs"] = False
    checked = SamplingParams.model_validate(fields).model_dump(exclude_unset=True)
    return default.model_copy(update=checked)


@dataclass
class _Session:
    """A run's trajectory tools, as the tool loop's :class:`ToolSession` (no workspace)."""

    tools: Sequence[BaseTool]

    async def finish(self, trajectory: Trajectory) -> Trajectory:
        return trajectory

    async def close(self) -> None:
        return None


class _Agent:
    """The graph's one node, and the per-run tools the tool loop's sessions hand out."""

    def __init__(
        self,
        chat_model: BaseChatModel,
        *,
        sampling: SamplingParams,
        max_tool_steps: int,
        max_completion_tokens: int | None,
        limits: TrajectoryToolLimits,
        system_prompt: str,
    ) -> None:
        self.chat_model = chat_model
        self.sampling = sampling
        self.limits = limits
        self.system_prompt = system_prompt
        self.model_name = str(
            getattr(chat_model, "model_name", None) or getattr(chat_model, "model", None) or "model"
        )
        # Tools by run id: set before the loop runs, read by its session factory.
        self.tools: dict[str, list[BaseTool]] = {}
        self.loop = build_tool_explorer(
            chat_model,
            self.session,
            max_steps=max_tool_steps,
            max_completion_tokens=max_completion_tokens,
            name="aggagent_loop",
        )

    async def session(self, task: ExploreTask) -> ToolSession:
        return _Session(self.tools[task.run_id])

    async def agent(self, state: AggAgentState, config: RunnableConfig) -> dict[str, Any]:
        trajectories = sorted(state.get("trajectories") or (), key=lambda t: t.index)
        if not trajectories:
            raise ValueError("the aggregator agent needs the last round's trajectories")
        prompt = agent_prompt(state.get("messages") or (), trajectories, self.system_prompt)
        params = run_sampling(config, self.sampling)
        final_round = max(t.round for t in trajectories) + 1
        # A run's sampling carries this call's own seed (PaCoRe derived it for the answer
        # round); the built-in sampling has a base seed, derived here the same way.
        given = _given_sampling(config) is not None
        seed = params.seed if given else explorer_seed(params.seed, final_round, 0)
        task = ExploreTask(
            run_id=f"aggagent-{uuid.uuid4().hex}",
            problem_id=None,
            round=final_round,
            index=0,
            width=1,
            messages=prompt,
            seed=seed,
            params=params,
        )
        self.tools[task.run_id] = make_trajectory_tools(trajectories, self.limits)
        try:
            out = await self.loop.graph.ainvoke({"task": task}, config)
        finally:
            self.tools.pop(task.run_id, None)
            if self.loop.release is not None:
                await self.loop.release(task)
        record: Trajectory = out["trajectory"]
        if record.failed:
            raise AggregatorAgentError(f"the aggregator agent's model call failed: {record.error}")
        messages: list[AnyMessage] = list(out["messages"])[len(prompt) :]
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage) or last.tool_calls:
            messages += await self._answer_now(list(out["messages"]), task, config)
        return {"messages": messages}

    async def _answer_now(
        self, conversation: list[AnyMessage], task: ExploreTask, config: RunnableConfig
    ) -> list[AnyMessage]:
        """Out of tool steps: one more call, no tools offered, for the answer."""
        note = HumanMessage(FINAL_NOTE)
        params = task.params or self.sampling
        kwargs: dict[str, Any] = {"temperature": params.temperature, "top_p": params.top_p}
        if params.max_tokens is not None:
            kwargs["max_tokens"] = params.max_tokens
        if task.seed is not None:
            kwargs["seed"] = task.seed
        prompt = [*conversation, note]
        if conversation and isinstance(conversation[-1], AIMessage):
            # A call left unanswered (out of token budget): not sent on, or the server refuses it.
            prompt = [*conversation[:-1], note]
        try:
            with model_step_span(self.model_name):
                answer = await self.chat_model.bind(**kwargs).ainvoke(prompt, config)
        except Exception as exc:
            raise AggregatorAgentError(
                f"the aggregator agent's model call failed: {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(answer, AIMessage):
            raise TypeError(f"chat model returned {type(answer).__name__}, not AIMessage")
        return [note, answer]


def build_aggregator_agent(
    model: ChatClient | BaseChatModel,
    *,
    limiter: SequenceLimiter | None = None,
    sampling: SamplingParams | None = None,
    max_tool_steps: int = DEFAULT_MAX_TOOL_STEPS,
    max_completion_tokens: int | None = None,
    limits: TrajectoryToolLimits | None = None,
    system_prompt: str = AGGAGENT_SYSTEM_PROMPT,
    name: str = "aggagent",
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The aggregator agent as a compiled graph (the contract in the module docstring).

    ``model`` is the run's :class:`~pacore_graph.llm.protocols.ChatClient` (the
    agent calls it through :class:`ClientChatModel`, holding ``limiter`` per
    call) or any LangChain chat model with ``bind_tools``. ``sampling`` is
    used when the caller gives no round sampling (its timeout and extra body
    always apply to a client). ``max_tool_steps`` bounds the model calls
    that may use tools, ``max_completion_tokens`` their tokens in total,
    ``limits`` each tool result.
    """
    if max_tool_steps < 1:
        raise ValueError(f"max_tool_steps must be >= 1, got {max_tool_steps}")
    sampling = sampling or SamplingParams()
    if isinstance(model, BaseChatModel):
        chat_model = model
    else:
        try:
            client = chat_client(model)
        except TypeError:
            raise TypeError(
                f"model must be a ChatClient or a LangChain chat model; got {model!r}"
            ) from None
        chat_model = ClientChatModel(client=client, params=sampling, limiter=limiter)
    agent = _Agent(
        chat_model,
        sampling=sampling,
        max_tool_steps=max_tool_steps,
        max_completion_tokens=max_completion_tokens,
        limits=limits or TrajectoryToolLimits(),
        system_prompt=system_prompt,
    )
    graph = StateGraph(AggAgentState, input_schema=AggAgentInput, output_schema=AggAgentOutput)
    graph.add_node("agent", agent.agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile(name=name)


def build_aggagent_graph(
    client: ChatClient,
    n: int,
    *,
    config: PaCoReConfig | None = None,
    compactor: Compactor | str = DEFAULT_COMPACTOR,
    limiter: SequenceLimiter | None = None,
    tracing: TraceOptions | bool | None = None,
    compactors: CompactorRegistry | Mapping[str, Compactor] | None = None,
    limits: RequestLimits | None = None,
    max_tool_steps: int = DEFAULT_MAX_TOOL_STEPS,
    tool_limits: TrajectoryToolLimits | None = None,
    name: str = "aggagent",
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """``aggagent:N``: N explorers (one ``n=N`` request), then the agent over their trajectories.

    Nothing but PaCoRe's public builder: ``config`` with rounds ``[n]``
    (sampling, retries, limits, compactor as for any method) and
    :func:`build_aggregator_agent` as the ``aggregator``, calling the same
    ``client`` under the same ``limiter``. The agent's step is the run's
    answer round of width 1 (``result.extra["aggregator"] == name``); it
    gets the round's sampling (a run's context included) and its seed as
    PaCoRe's synthesis round would.
    """
    cfg = (config or PaCoReConfig()).with_settings({"rounds": [n]})  # validated like any width
    limiter = limiter or SequenceLimiter(cfg.max_concurrency)
    agent = build_aggregator_agent(
        client,
        limiter=limiter,
        sampling=cfg.sampling,
        max_tool_steps=max_tool_steps,
        limits=tool_limits,
        name=name,
    )
    return build_pacore_graph(
        client,
        config=cfg,
        aggregator=agent,
        compactor=compactor,
        limiter=limiter,
        tracing=tracing,
        compactors=compactors,
        limits=limits,
        name=name,
    )
