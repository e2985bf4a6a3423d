"""The PaCoRe graph's nodes, as methods of one small object that holds their parts.

:func:`~pacore_graph.graph.build_pacore_graph` validates the parts (config,
compactor, template, explorer, aggregator, tracer) once and hands them to a
:class:`PaCoReNodes`; the builder then only wires its methods into a
``StateGraph``. Keeping the nodes here, rather than as closures inside the
builder, is what lets each one be called and tested on its own: ``await
nodes.round_node(state, config)`` needs no graph around it.

The nodes never mutate what they receive: the state's values are the frozen
records of :mod:`pacore_graph.records`, and each node returns a partial
update.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.runnables import RunnableConfig
from langgraph.types import Send

from pacore_graph.aggregation import Aggregator
from pacore_graph.compaction import Compactor
from pacore_graph.config import PaCoReConfig
from pacore_graph.errors import RoundFailedError
from pacore_graph.explorer import Explorer, ExploreTask
from pacore_graph.prompts import (
    SYNTHESIS_TEMPLATE,
    last_user_index,
    select_references,
    synthesis_messages,
)
from pacore_graph.records import PaCoReResult, Trajectory
from pacore_graph.state import PaCoReState
from pacore_graph.streaming import (
    answer_message_id,
    explorer_finished,
    progress_writer,
    round_compacted,
    round_started,
)
from pacore_graph.tracing import RunTracer

__all__ = ["PaCoReNodes", "normalize_conversation"]


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


@dataclass(slots=True, kw_only=True)
class PaCoReNodes:
    """Everything the nodes share, validated by the builder; one instance per compiled graph.

    ``explorer`` runs one trajectory (``explore`` wraps it in a span);
    ``aggregator``, when set, replaces the final K=1 round. ``name`` becomes
    the ``name`` of the answer's ``AIMessage``.
    """

    config: PaCoReConfig
    compactor: Compactor
    explorer: Explorer
    tracer: RunTracer
    aggregator: Aggregator | None = None
    template: str = SYNTHESIS_TEMPLATE
    model_name: str | None = None
    explorer_name: str | None = None
    name: str = "pacore"
    schedule: tuple[int, ...] = field(init=False)
    compactor_name: str = field(init=False)

    def __post_init__(self) -> None:
        cfg = self.config
        self.schedule = cfg.schedule if self.aggregator is None else cfg.rounds
        self.compactor_name = getattr(self.compactor, "name", type(self.compactor).__name__)

    # ------------------------------------------------------------------ nodes

    async def prepare(self, state: PaCoReState) -> dict[str, Any]:
        """Check the problem and open the run's record (and its trace span)."""
        convo = normalize_conversation(state.get("messages") or [])
        run_id = uuid.uuid4().hex
        self.tracer.start_run(run_id, self.schedule, self.config.preset_name())
        return {
            "run_id": run_id,
            "started": time.time(),
            "conversation": tuple(convo),
            "round": 0,
            "rounds": (),
            "pending": None,
        }

    async def round_node(self, state: PaCoReState, config: RunnableConfig) -> dict[str, Any]:
        """Render P(x, M_{r-1}) once for all K explorers of round r."""
        r = state["round"]
        conversation = state["conversation"]
        progress_writer()(round_started(r, self.schedule[r]))
        if r == 0:
            self.tracer.start_round(state["run_id"], r, self.schedule[r], ())
            return {"prompt": conversation, "prompt_refs": ()}
        refs, texts = select_references(
            state["rounds"][-1], self.config.shuffle_seed, self.config.reference_order
        )
        prompt = synthesis_messages(conversation, texts, self.template)
        self.tracer.start_round(state["run_id"], r, self.schedule[r], texts)
        return {"prompt": tuple(prompt), "prompt_refs": refs}

    def fan_out(self, state: PaCoReState) -> list[Send]:
        """One ``Send`` per explorer of the round, each with its index and seed."""
        r = state["round"]
        width = self.schedule[r]
        prompt, refs = state["prompt"], state["prompt_refs"]
        run_id, problem_id = state["run_id"], state.get("problem_id")
        base_seed = self.config.sampling.seed
        final = self.aggregator is None and r == len(self.schedule) - 1
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
                    stream=final,
                ),
            )
            for i in range(width)
        ]

    async def explore(self, task: ExploreTask, config: RunnableConfig) -> dict[str, Any]:
        """Run the explorer for one trajectory; a failed call comes back recorded, not raised."""
        with self.tracer.explorer(
            task.run_id, task.index, task.references, task.messages, self.explorer_name
        ) as span:
            trajectory = await self.explorer.explore(task, config)
            span.record(trajectory)
        progress_writer()(explorer_finished(trajectory))
        return {"pending": [trajectory]}

    async def compact(self, state: PaCoReState, config: RunnableConfig) -> dict[str, Any]:
        """Fan-in: compact every trajectory and keep the round; fail if none succeeded."""
        r = state["round"]
        done = sorted(state.get("pending") or (), key=lambda t: t.index)
        compacted = tuple(
            t if t.failed else replace(t, message=self.compactor.compact(t)) for t in done
        )
        self.tracer.compaction(state["run_id"], self.compactor_name, compacted)
        self.tracer.end_round(state["run_id"], compacted)
        progress_writer()(round_compacted(r, compacted))
        if not compacted or all(t.failed for t in compacted):
            errors = [t.error or "" for t in compacted]
            first = errors[0] if errors else "no explorer returned"
            raise RoundFailedError(
                f"round {r}: all {len(compacted)} explorer calls failed; first error: {first}",
                round_index=r,
                errors=errors,
            )
        return {"rounds": (*state["rounds"], compacted), "pending": None, "round": r + 1}

    def route(self, state: PaCoReState) -> str:
        """Next round, or the answer."""
        return "round" if state["round"] < len(self.schedule) else "finalize"

    async def finalize(self, state: PaCoReState, config: RunnableConfig) -> dict[str, Any]:
        """The answer (the final round's message, or the aggregator's choice) and the record."""
        rounds = state["rounds"]
        sampling = self.config.sampling.model_dump(mode="json")
        details: dict[str, Any] = {"run_id": state["run_id"], "sampling": sampling}
        final: Trajectory
        if self.aggregator is None:
            final = next(t for t in rounds[-1] if not t.failed)
            answer = final.message or ""
        else:
            verdict = self.aggregator.aggregate(rounds)
            final, answer = verdict.trajectory, verdict.answer
            details.update(aggregator=self.aggregator.name, chosen=final.id, **verdict.details)
        result = PaCoReResult(
            answer=answer,
            reasoning=final.reasoning,
            rounds=rounds,
            schedule=self.schedule,
            problem_id=state.get("problem_id"),
            wall_s=time.time() - state["started"],
            model=self.model_name,
            preset=self.config.preset_name(),
            extra=details,
        )
        self.tracer.end_run(state["run_id"], result)
        extra = {"reasoning_content": final.reasoning} if final.reasoning else {}
        reply: BaseMessage = AIMessage(
            content=answer,
            name=self.name,
            additional_kwargs=extra,
            id=answer_message_id(state["run_id"]),
        )
        return {"answer": answer, "result": result, "messages": [reply]}

    # ---------------------------------------------------------------- helpers

    def fail_run(self, state: Any, exc: BaseException) -> None:
        """End the run's open spans with an error (a node raised)."""
        run_id = state.run_id if isinstance(state, ExploreTask) else state.get("run_id")
        self.tracer.fail_run(run_id, exc)
