"""``build_pacore_graph``: PaCoRe as a compiled LangGraph graph.

Topology (see ``tests/snapshots/pacore_graph.mmd``)::

    START -> prepare -> round --Send x K--> explore -> compact --+--> round (next)
                                                                 +--> finalize -> END

- ``prepare`` checks the problem and starts the run record.
- ``round`` renders P(x, M_{r-1}) once and fans out one ``Send`` per
  explorer, each with its index and seed.
- ``explore`` runs the explorer for one trajectory (see ``explorer.py``).
- ``compact`` is the fan-in: it applies the compactor to every trajectory,
  keeps the round, and routes to the next round or to ``finalize``.
- ``finalize`` returns the answer (the final K=1 round's message), the full
  :class:`~pacore_graph.records.PaCoReResult`, and appends the answer to
  ``messages`` as an ``AIMessage``.

The builder validates everything (config, compactor, template, explorer)
once; the returned graph only runs.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Send

from pacore_graph.aggregation import Aggregator
from pacore_graph.batching import SampleBatcher
from pacore_graph.client import ChatClient
from pacore_graph.compaction import Compactor, compactor_from_name
from pacore_graph.config import PaCoReConfig
from pacore_graph.errors import RoundFailedError
from pacore_graph.explorer import ChatExplorer, Explorer, ExploreTask
from pacore_graph.limits import SequenceLimiter
from pacore_graph.prompts import (
    SYNTHESIS_TEMPLATE,
    last_user_index,
    render_synthesis,
    select_references,
    synthesis_messages,
)
from pacore_graph.records import PaCoReResult, Trajectory
from pacore_graph.state import PaCoReInput, PaCoReOutput, PaCoReState
from pacore_graph.tracing import RunTracer, TraceOptions

__all__ = ["ainvoke_pacore", "build_pacore_graph", "normalize_conversation"]


def normalize_conversation(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """OpenAI-style dicts from LangChain messages or dicts; ValueError if there is no problem."""
    if not messages:
        raise ValueError("empty problem: 'messages' must hold at least one user message")
    converted = convert_to_openai_messages(list(messages))
    convo = [converted] if isinstance(converted, dict) else list(converted)
    i = last_user_index(convo)
    content = convo[i].get("content")
    if isinstance(content, list):  # content blocks: keep the text
        content = "".join(
            b.get("text", "") for b in content if isinstance(b, Mapping) and b.get("type") == "text"
        )
        convo[i]["content"] = content
    if not isinstance(content, str) or not content.strip():
        raise ValueError("empty problem: the last user message has no text")
    return convo


def _resolve_compactor(compactor: Compactor | str) -> Compactor:
    resolved = compactor_from_name(compactor) if isinstance(compactor, str) else compactor
    if not callable(getattr(resolved, "compact", None)):
        raise TypeError(f"compactor {compactor!r} has no compact(trajectory) method")
    return resolved


def _check_template(template: str) -> None:
    try:
        text = render_synthesis("PROBLEM", ["REF-A", "REF-B"], template)
    except Exception as exc:
        raise ValueError(f"synthesis template does not render: {exc}") from exc
    if "PROBLEM" not in text or "REF-A" not in text or "REF-B" not in text:
        raise ValueError(
            "synthesis template must use {{ original_prompt }} and loop over ref_responses"
        )


def build_pacore_graph(
    client: ChatClient | None = None,
    *,
    config: PaCoReConfig | Mapping[str, Any] | None = None,
    compactor: Compactor | str = "conclusion",
    explorer: Explorer | None = None,
    template: str = SYNTHESIS_TEMPLATE,
    limiter: SequenceLimiter | None = None,
    aggregator: Aggregator | None = None,
    tracing: TraceOptions | bool | None = None,
    name: str = "pacore",
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Build and compile the PaCoRe graph.

    ``client`` is the model (any :class:`~pacore_graph.client.ChatClient`);
    it may be omitted when a custom ``explorer`` brings its own. ``config``
    gives K, sampling, retries and the concurrency limit, which is shared by
    every problem this graph runs at once (pass ``limiter`` to share one
    across graphs). The graph's input is ``{"messages": [...],
    "problem_id"?: str}``; its output adds ``answer`` and ``result``.

    ``aggregator`` replaces the final K=1 synthesis round with another way of
    choosing the answer from the last configured round (the baselines in
    ``pacore_graph.graphs``: a single sample, a majority vote).

    ``tracing`` controls OpenTelemetry spans (see :mod:`pacore_graph.tracing`):
    by default the global tracer provider is used, which is a no-op until the
    user configures one; ``False`` turns span creation off entirely.
    """
    cfg = (
        PaCoReConfig.model_validate(config or {})
        if not isinstance(config, PaCoReConfig)
        else config
    )
    compact_with = _resolve_compactor(compactor)
    _check_template(template)
    if explorer is None:
        if client is None:
            raise ValueError("build_pacore_graph needs a client (or an explorer that brings one)")
        if not isinstance(client, ChatClient):
            raise TypeError(f"client must implement ChatClient.complete(...); got {client!r}")
        limiter = limiter or SequenceLimiter(cfg.max_concurrency)
        batcher = SampleBatcher(client, limiter, cfg.sampling, enabled=cfg.batch_samples)
        explorer = ChatExplorer(batcher)
    elif not isinstance(explorer, Explorer):
        raise TypeError(
            f"explorer must have an async explore(task, config) method; got {explorer!r}"
        )
    if aggregator is not None and not isinstance(aggregator, Aggregator):
        raise TypeError(f"aggregator must have aggregate(rounds); got {aggregator!r}")
    schedule = cfg.schedule if aggregator is None else cfg.rounds
    model_name = getattr(client, "model", None)
    preset = cfg.preset_name()
    base_seed = cfg.sampling.seed
    # Kept on every result so exported RL episodes know how they were sampled.
    sampling_record = cfg.sampling.model_dump(mode="json")
    run_explorer = explorer
    if isinstance(tracing, TraceOptions):
        trace_options = tracing
    else:
        trace_options = TraceOptions(enabled=tracing is not False)
    tracer = RunTracer(trace_options, config=cfg, model=model_name)
    explorer_name = (
        None
        if isinstance(explorer, ChatExplorer)
        else str(getattr(explorer, "name", None) or type(explorer).__name__)
    )
    compactor_name = getattr(compact_with, "name", type(compact_with).__name__)

    async def prepare(state: PaCoReState) -> dict[str, Any]:
        convo = normalize_conversation(state.get("messages") or [])
        run_id = uuid.uuid4().hex
        tracer.start_run(run_id, schedule, preset)
        return {
            "run_id": run_id,
            "started": time.time(),
            "conversation": tuple(convo),
            "round": 0,
            "rounds": (),
            "pending": None,
        }

    async def round_node(state: PaCoReState, config: RunnableConfig) -> dict[str, Any]:
        r = state["round"]
        conversation = state["conversation"]
        if r == 0:
            tracer.start_round(state["run_id"], r, schedule[r], ())
            return {"prompt": conversation, "prompt_refs": ()}
        refs, texts = select_references(state["rounds"][-1], cfg.shuffle_seed, cfg.reference_order)
        prompt = synthesis_messages(conversation, texts, template)
        tracer.start_round(state["run_id"], r, schedule[r], texts)
        return {"prompt": tuple(prompt), "prompt_refs": refs}

    def fan_out(state: PaCoReState) -> list[Send]:
        r = state["round"]
        width = schedule[r]
        prompt, refs = state["prompt"], state["prompt_refs"]
        run_id, problem_id = state["run_id"], state.get("problem_id")
        return [
            Send(
                "explore",
                ExploreTask(
                    run_id=run_id,
                    problem_id=problem_id,
                    round=r,
                    index=i,
                    width=width,
                    messages=prompt,
                    references=refs,
                    seed=None if base_seed is None else base_seed + 1000 * r + i,
                ),
            )
            for i in range(width)
        ]

    async def explore(task: Any, config: RunnableConfig) -> dict[str, Any]:
        # ``task`` is the ExploreTask carried by this explorer's Send.
        with tracer.explorer(
            task.run_id, task.index, task.references, task.messages, explorer_name
        ) as span:
            trajectory = await run_explorer.explore(task, config)
            span.record(trajectory)
        return {"pending": [trajectory]}

    async def compact(state: PaCoReState, config: RunnableConfig) -> dict[str, Any]:
        r = state["round"]
        done = sorted(state.get("pending") or (), key=lambda t: t.index)
        compacted = tuple(
            t if t.failed else replace(t, message=compact_with.compact(t)) for t in done
        )
        tracer.compaction(state["run_id"], compactor_name, compacted)
        tracer.end_round(state["run_id"], compacted)
        if not compacted or all(t.failed for t in compacted):
            errors = [t.error or "" for t in compacted]
            first = errors[0] if errors else "no explorer returned"
            raise RoundFailedError(
                f"round {r}: all {len(compacted)} explorer calls failed; first error: {first}",
                round_index=r,
                errors=errors,
            )
        return {"rounds": (*state["rounds"], compacted), "pending": None, "round": r + 1}

    def route(state: PaCoReState) -> str:
        return "round" if state["round"] < len(schedule) else "finalize"

    async def finalize(state: PaCoReState, config: RunnableConfig) -> dict[str, Any]:
        rounds = state["rounds"]
        details: dict[str, Any] = {"run_id": state["run_id"], "sampling": sampling_record}
        final: Trajectory
        if aggregator is None:
            final = next(t for t in rounds[-1] if not t.failed)
            answer = final.message or ""
        else:
            verdict = aggregator.aggregate(rounds)
            final, answer = verdict.trajectory, verdict.answer
            details.update(aggregator=aggregator.name, chosen=final.id, **verdict.details)
        result = PaCoReResult(
            answer=answer,
            reasoning=final.reasoning,
            rounds=rounds,
            schedule=schedule,
            problem_id=state.get("problem_id"),
            wall_s=time.time() - state["started"],
            model=model_name,
            preset=preset,
            extra=details,
        )
        tracer.end_run(state["run_id"], result)
        extra = {"reasoning_content": final.reasoning} if final.reasoning else {}
        reply: BaseMessage = AIMessage(content=answer, name=name, additional_kwargs=extra)
        return {"answer": answer, "result": result, "messages": [reply]}

    def guarded(node: Callable[..., Awaitable[dict[str, Any]]]) -> Any:
        """End the run's open spans with an error when a node raises, then re-raise."""

        @functools.wraps(node)
        async def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
            try:
                return await node(state, config)
            except BaseException as exc:
                run_id = state.run_id if isinstance(state, ExploreTask) else state.get("run_id")
                tracer.fail_run(run_id, exc)
                raise

        return run

    builder = StateGraph(PaCoReState, input_schema=PaCoReInput, output_schema=PaCoReOutput)
    builder.add_node("prepare", prepare)
    builder.add_node("round", guarded(round_node))
    builder.add_node("explore", guarded(explore))
    builder.add_node("compact", guarded(compact))
    builder.add_node("finalize", guarded(finalize))
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "round")
    builder.add_conditional_edges("round", fan_out, ["explore"])
    builder.add_edge("explore", "compact")
    builder.add_conditional_edges("compact", route, ["round", "finalize"])
    builder.add_edge("finalize", END)
    graph = builder.compile(name=name)
    # Three steps per round plus prepare/finalize; LangGraph's default limit (25)
    # would stop a run of more than seven rounds.
    return graph.with_config(recursion_limit=3 * len(schedule) + 10)


async def ainvoke_pacore(
    graph: Any,
    problem: str | Sequence[Any],
    *,
    problem_id: str | None = None,
    config: RunnableConfig | None = None,
) -> PaCoReResult:
    """Run one problem (a question string or a conversation) and return its record."""
    messages = [{"role": "user", "content": problem}] if isinstance(problem, str) else list(problem)
    state: dict[str, Any] = {"messages": messages}
    if problem_id is not None:
        state["problem_id"] = problem_id
    out = await graph.ainvoke(state, config)
    result: PaCoReResult = out["result"]
    return result
