"""The PaCoRe graph's nodes, as methods of one small object that holds their parts.

:func:`~pacore_graph.graph.builder.build_pacore_graph` validates the parts (config,
compactor, round plan, explorer, aggregator, tracer) once and hands them to a
:class:`PaCoReNodes`; the builder then only wires its methods into a
``StateGraph``. Keeping the nodes here, rather than as closures inside the
builder, is what lets each one be called and tested on its own: ``await
nodes.round_node(state, config)`` needs no graph around it.

Every method is the same nodes over different parts: what a round asks is its
plan (:mod:`pacore_graph.graph.plans`), what answers is the explorer
(:mod:`pacore_graph.graph.explorer_parts`), what passes on is the compactor
(:mod:`pacore_graph.graph.compact_step`), and how the run ends is the
aggregator (a vote, a graph, or PaCoRe's K=1 synthesis round).

A failure belongs to a trajectory, whatever raised it (a model error, an
explorer's bug, a compactor's): it is recorded on the trajectory and its
span, and a round fails only when every trajectory failed. Such a round
raises :class:`~pacore_graph.errors.RoundFailedError`, and a resumed thread
(``ainvoke(None, config)``) asks again for exactly the trajectories that
failed: the compaction node finds them failed by an earlier invocation (the
explorers did not run in this one) and runs them again before it compacts.

The nodes never mutate what they receive: the state's values are the frozen
records of :mod:`pacore_graph.values.records`, and each node returns a partial
update.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, cast

from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.runnables import RunnableConfig
from langgraph.errors import GraphBubbleUp
from langgraph.runtime import Runtime
from langgraph.types import Send

from pacore_graph.control.budget import TokenBudget
from pacore_graph.control.consensus import EarlyStop
from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.control.quorum import DROPPED, RoundGate, RoundQuorum
from pacore_graph.errors import RoundFailedError
from pacore_graph.graph.compact_step import CompactStep, compact_step, compaction_tokens
from pacore_graph.graph.explorer import ExploreGroup, ExploreTask, failed_trajectory
from pacore_graph.graph.explorer_parts import ExplorerPart, explorer_part
from pacore_graph.graph.journal import journal_key, journal_of
from pacore_graph.graph.messages_explorer import with_round_sampling
from pacore_graph.graph.plans import (
    RoundInput,
    RoundPlan,
    RoundPrompts,
    SynthesisPlan,
    plan_round,
)
from pacore_graph.graph.state import PaCoReState, RunShape, request_settings
from pacore_graph.graph.streaming import (
    answer_message_id,
    explorer_finished,
    progress_writer,
    round_compacted,
    round_started,
)
from pacore_graph.llm.session_header import session_scope
from pacore_graph.otel.spans import RunTracer, record_call_error
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.per_run import SettingsError, resolve_settings, run_settings_given
from pacore_graph.settings.request_limits import RequestLimits
from pacore_graph.values.aggregation import Aggregator, aggregate_off_loop
from pacore_graph.values.compaction import Compactor
from pacore_graph.values.compactor_registry import CompactorRegistry
from pacore_graph.values.prompts import SYNTHESIS_TEMPLATE, last_user_index
from pacore_graph.values.records import PaCoReResult, Trajectory
from pacore_graph.values.seeds import explorer_seed

__all__ = ["PaCoReNodes", "normalize_conversation"]

#: The node a graph aggregator's answer round is sent to (the explorers' is ``explore``).
AGGREGATE_NODE = "aggregate"


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

    ``explorer`` runs one trajectory (any kind :func:`explorer_part` takes;
    ``explore`` wraps it in a span); ``plan`` decides what each round asks
    (default: :class:`~pacore_graph.graph.plans.SynthesisPlan` over
    ``template`` and the config's reference order); ``aggregator``, when
    set, replaces the final K=1 round with a vote, and ``answer`` (with
    ``answer_plan``) makes that round a graph's (an aggregator graph).
    ``name`` becomes the ``name`` of the answer's ``AIMessage``.
    """

    config: PaCoReConfig
    compactor: Compactor | CompactStep | Any
    explorer: Any
    tracer: RunTracer
    aggregator: Aggregator | None = None
    answer: ExplorerPart | None = None
    answer_plan: RoundPlan | None = None
    plan: RoundPlan | None = None
    template: str = SYNTHESIS_TEMPLATE
    model_name: str | None = None
    explorer_name: str | None = None
    name: str = "pacore"
    limiter: SequenceLimiter | None = None
    """Held (one unit per trajectory) around an explorer that does not hold it itself; the
    chat explorer's batcher holds one unit per sample."""
    compactors: CompactorRegistry = field(default_factory=CompactorRegistry)
    """The compactor names a run may choose (``context.compactor``): never imported."""
    limits: RequestLimits = field(default_factory=RequestLimits)
    """Caps on what a run's own settings may ask for (rounds, samples, max_tokens)."""
    early_stop: EarlyStop | None = None
    """Ends a run after a round whose answers agree enough (default: from the config)."""
    part: ExplorerPart = field(init=False)
    compact_with: CompactStep = field(init=False)
    group_sends: bool = field(init=False)
    """One ``Send`` per round carrying all K tasks (:class:`ExploreGroup`): the chat
    explorer's calls are ``n``-batched, so its K samples come back together."""
    schedule: tuple[int, ...] = field(init=False)
    shape: RunShape = field(init=False)
    """The graph's own run shape: what a run gets when its context changes nothing."""
    quorum: RoundQuorum = field(init=False)
    budget: TokenBudget | None = field(init=False)
    # One gate per round in flight, keyed by (run id, round): in-process state
    # shared by that round's explorers, dropped when the round is compacted.
    _gates: dict[tuple[str, int], RoundGate] = field(init=False)
    # Rounds whose explorers ran in this process since their last compaction:
    # failures found without this mark were saved by an earlier invocation.
    _explored: set[tuple[str, int]] = field(init=False)
    _compact_steps: dict[str, CompactStep] = field(init=False)

    def __post_init__(self) -> None:
        cfg = self.config
        self.part = explorer_part(self.explorer)
        self.compact_with = compact_step(self.compactor)
        self.group_sends = self.part.grouped
        if self.explorer_name is None:
            self.explorer_name = self.part.name
        if self.plan is None:
            self.plan = SynthesisPlan(self.template, cfg.shuffle_seed, cfg.reference_order)
        self.schedule = self._schedule(cfg)
        self.shape = RunShape.of(cfg, self.schedule)
        self.quorum = RoundQuorum(quorum=cfg.round_quorum, deadline=cfg.round_deadline)
        if self.early_stop is None and cfg.early_stop_consensus is not None:
            self.early_stop = EarlyStop(cfg.early_stop_consensus)
        self.budget = TokenBudget(cfg.token_budget) if cfg.token_budget is not None else None
        self._gates = {}
        self._explored = set()
        self._compact_steps = {}

    # ------------------------------------------------------------------ nodes

    async def prepare(
        self, state: PaCoReState, config: RunnableConfig, runtime: Runtime[Any] | None = None
    ) -> dict[str, Any]:
        """Check the problem and this run's settings; open the run's record (and its span).

        The settings come from the run's context (``runtime.context``); those
        still sent in ``config["configurable"]`` are read with a deprecation
        warning.
        """
        convo = normalize_conversation(state.get("messages") or [])
        context = runtime.context if runtime is not None else None
        configurable = config.get("configurable") or {}
        given, source = run_settings_given(
            context, configurable, nested=_nested(configurable.get("checkpoint_ns"))
        )
        cfg, compactor = resolve_settings(
            self.config, given, limits=self.limits, compactors=self.compactors, source=source
        )
        run_id = uuid.uuid4().hex
        schedule = self._schedule(cfg)
        self.tracer.start_run(run_id, schedule, cfg.preset_name(), messages=convo, config=cfg)
        update: dict[str, Any] = {
            "run_id": run_id,
            "started": time.time(),
            "conversation": tuple(convo),
            "round": 0,
            "rounds": (),
            "pending": None,
        }
        if cfg is not self.config:
            update["settings"] = RunShape.of(cfg, schedule)
        if compactor is not None:
            update["compactor"] = compactor
        trace = self.tracer.context_of(run_id)
        if trace is not None:
            update["trace"] = trace
        return update

    def _width(self, state: PaCoReState) -> tuple[int, str | None]:
        """Round r's width: as planned, unless the token budget shrinks it."""
        r = state["round"]
        schedule = self.run_schedule(state)
        planned = schedule[r]
        if self.budget is None or r == 0:
            return planned, None
        rounds = state["rounds"]
        decision = self.budget.width(
            round_index=r,
            planned=planned,
            final=self.aggregator is None and r == len(schedule) - 1,
            spent=sum(t.completion_tokens for rnd in rounds for t in rnd),
            trajectories_so_far=sum(len(rnd) for rnd in rounds),
        )
        return decision.width, decision.reason

    def _answer_round(self, r: int, schedule: Sequence[int]) -> bool:
        """Round r is the answer round (synthesis, or the aggregator graph's turn)."""
        return self.aggregator is None and r == len(schedule) - 1

    async def round_node(self, state: PaCoReState, config: RunnableConfig) -> dict[str, Any]:
        """Plan round r (once for all its K explorers): its prompts, from the round plan."""
        r = state["round"]
        self.tracer.resume(state["run_id"], state.get("trace"))  # a resumed run's spans
        width, reason = self._width(state)
        control: dict[str, Any] = {"width": width, "width_reason": reason}
        if self.quorum.enabled:
            self._gates[(state["run_id"], r)] = self.quorum.gate(width)
        progress_writer()(round_started(r, width))
        final = self._answer_round(r, self.run_schedule(state))
        view = RoundInput(
            problem=state["conversation"],
            problem_id=state.get("problem_id"),
            round=r,
            width=width,
            rounds=state["rounds"],
            final=final,
        )
        plan = self.answer_plan if final and self.answer_plan is not None else self.plan
        assert plan is not None
        prompts = await plan_round(plan, view)
        self.tracer.start_round(state["run_id"], r, width, prompts.reads or ())
        if prompts.note:
            control["control"] = (*(state.get("control") or ()), {"round": r, **prompts.note})
        return {"plan": prompts, **control}

    def round_tasks(self, state: PaCoReState) -> list[ExploreTask]:
        """Round r's explorer tasks, each with its prompt, index, seed and sampling."""
        r = state["round"]
        shape = self.run_shape(state)
        schedule, sampling = shape.schedule, shape.sampling_for(r)
        width = state.get("width") or schedule[r]
        plan = state.get("plan") or _legacy_plan(state)
        run_id, problem_id = state["run_id"], state.get("problem_id")
        base_seed = shape.sampling.seed
        trace = state.get("trace")
        final = self._answer_round(r, schedule)
        shared = plan.is_shared
        tasks = []
        for i in range(width):
            prompt = plan.prompt_for(i)
            tasks.append(
                ExploreTask(
                    run_id=run_id,
                    problem_id=problem_id,
                    round=r,
                    index=i,
                    width=width if shared else 1,  # explorers sharing this prompt (one request)
                    messages=prompt.messages,
                    references=prompt.references,
                    seed=explorer_seed(base_seed, r, i),
                    stream=final,
                    params=sampling,
                    extras=prompt.extras,
                    trace=trace,
                )
            )
        return tasks

    async def fan_out(self, state: PaCoReState) -> list[Send]:
        """The round's explorer tasks as ``Send``s.

        One ``Send`` per explorer, or one for the whole round when the
        explorer groups its calls (its K samples are one ``n=K`` request).
        The answer round of a graph aggregator goes to its own node.
        """
        tasks = self.round_tasks(state)
        if self.answer is not None and self._answer_round(state["round"], self.run_schedule(state)):
            return [Send(AGGREGATE_NODE, task) for task in tasks]
        if self.group_sends:
            return [Send("explore", ExploreGroup(tuple(tasks)))]
        return [Send("explore", task) for task in tasks]

    async def explore(
        self, task: ExploreTask | ExploreGroup, config: RunnableConfig
    ) -> dict[str, Any]:
        """Run the explorer for one trajectory, or a group's concurrently.

        A failure comes back recorded, not raised; a dropped one (round
        control) comes back as nothing, and ``compact`` records it. In a
        journaled run (:mod:`pacore_graph.graph.journal`) a call answered
        before is replayed from the journal, and a new one is recorded there
        before the node returns.
        """
        self._explored.add((task.run_id, task.round))
        explore = partial(self._explore_tasks, self.part, None, task, config)
        return {"pending": await self._through_journal(task, config, explore)}

    def subgraph_explore(self, part: ExplorerPart) -> Callable[..., Awaitable[Any]]:
        """The node for an explorer that is a compiled graph: it runs as a real subgraph.

        The node's function refers to the compiled graph directly, which is
        how LangGraph finds a subgraph inside a node: it then shows in
        ``get_graph(xray=True)``, streams with ``subgraphs=True`` and is
        checkpointed in the parent's namespace.
        """
        subgraph = part.graph

        async def explore(task: ExploreTask, config: RunnableConfig) -> dict[str, Any]:
            self._explored.add((task.run_id, task.round))

            async def one() -> list[Trajectory]:
                try:
                    # ``subgraph`` named here: LangGraph finds a node's subgraph
                    # among the names its function uses.
                    return await self._explore_tasks(part, subgraph, task, config)
                except GraphBubbleUp:
                    self.pause_run(task)  # an interrupt: the run goes on when resumed
                    raise
                except BaseException as exc:
                    self.fail_run(task, exc)
                    raise

            return {"pending": await self._through_journal(task, config, one)}

        return explore

    async def _through_journal(
        self,
        task: ExploreTask | ExploreGroup,
        config: RunnableConfig,
        explore: Callable[[], Awaitable[list[Trajectory]]],
    ) -> list[Trajectory]:
        """``explore()``'s trajectories, or the journal's for a call it answered before.

        Every ``explore`` node (plain, grouped, subgraph) goes through here: in
        a journaled run a call is looked up by its key first, and a new one
        is recorded before the node returns; without a journal it just runs.
        """
        journal = journal_of(config)
        if journal is None:
            return await explore()
        key = journal_key(task)
        replayed = await journal.replay(key)
        if replayed is not None:
            return list(replayed)
        found = await explore()
        await journal.record(key, found)
        return found

    async def _explore_tasks(
        self,
        part: ExplorerPart,
        graph: Any,
        task: ExploreTask | ExploreGroup,
        config: RunnableConfig,
    ) -> list[Trajectory]:
        """The trajectories of one ``Send``'s explorers (the dropped ones left out)."""
        tasks = task.tasks if isinstance(task, ExploreGroup) else (task,)
        name = self.explorer_name if part is self.part else part.name
        if len(tasks) == 1:
            (only,) = tasks
            call = partial(self._run_part, part, graph, only, config)
            one = await self._explore_one(only, call, name)
            return [] if one is None else [one]
        if part.run_round is not None:  # one request for the round, sent from this task
            with session_scope(tasks[0].run_id):  # the run's session header on it
                return await part.run_round(tasks, config, partial(self._explore_one, name=name))
        try:
            async with asyncio.TaskGroup() as tg:  # an error in one cancels its siblings
                runs = [
                    tg.create_task(
                        self._explore_one(t, partial(self._run_part, part, graph, t, config), name)
                    )
                    for t in tasks
                ]
        except BaseExceptionGroup as errors:  # raised as a lone explorer would raise it
            raise errors.exceptions[0] from None
        return [t for run in runs if (t := run.result()) is not None]

    async def _explore_one(
        self, task: ExploreTask, call: Callable[[], Awaitable[Trajectory]], name: str | None
    ) -> Trajectory | None:
        """One explorer's trajectory from ``call``, in its span and through the round's gate.

        None when round control dropped it (``compact`` records it as dropped,
        not failed); whatever the explorer raises (but a pause,
        ``GraphInterrupt``, or a cancellation) fails its trajectory only.
        """
        gate = self._gates.get((task.run_id, task.round)) if self._gates else None
        if task.trace is not None:
            self.tracer.resume(task.run_id, task.trace, task.round)  # no-op unless resumed
        with (
            session_scope(task.run_id),  # the run's session header on its requests
            self.tracer.explorer(
                task.run_id,
                task.index,
                task.references,
                task.messages,
                name,
                params=task.params,
            ) as span,
        ):
            try:
                if gate is None:
                    trajectory = await call()
                else:
                    outcome = await gate.run(call)
                    if outcome is DROPPED:
                        return None
                    trajectory = cast(Trajectory, outcome)
            except GraphBubbleUp:
                span.pause()
                raise
            except Exception as exc:  # the trajectory's failure, not the run's
                record_call_error(exc)
                span.failed(exc)
                trajectory = failed_trajectory(task, exc)
            span.record(trajectory)
        progress_writer()(explorer_finished(trajectory))
        return trajectory

    async def _run_part(
        self, part: ExplorerPart, graph: Any, task: ExploreTask, config: RunnableConfig
    ) -> Trajectory:
        """One call of ``part``: with the round's sampling in its config, within the limits."""
        if part.messages:
            config = with_round_sampling(config, self._sampling_of(task), stream=task.stream)
        try:
            if self.limiter is None or part.holds_limits:
                return await part.run(graph, task, config)
            async with self.limiter.hold(1):
                return await part.run(graph, task, config)
        finally:
            if part.release is not None:
                await part.release(task)

    def _sampling_of(self, task: ExploreTask) -> dict[str, Any]:
        """The round's sampling as a messages graph reads it (``pacore_sampling``)."""
        params = task.params or self.config.sampling
        return {**request_settings(params, self.model_name), "seed": task.seed}

    async def compact(self, state: PaCoReState, config: RunnableConfig) -> dict[str, Any]:
        """Fan-in: compact every trajectory and keep the round; fail if none succeeded."""
        r = state["round"]
        run_id = state["run_id"]
        gate = self._gates.pop((run_id, r), None)
        fresh = (run_id, r) in self._explored
        self._explored.discard((run_id, r))
        self.tracer.resume(run_id, state.get("trace"), r)  # no-op unless resumed
        done = sorted(state.get("pending") or (), key=lambda t: t.index)
        if done and not fresh and all(t.failed for t in done):
            # Failed in an earlier invocation (this is a resumed thread): ask again
            # for exactly those, now, before the round is judged.
            done = await self._explore_again(state, config, done)
        name = state.get("compactor")
        step = self.compact_with if name is None else self._compact_step(name)
        shape = self.run_shape(state)
        used = shape.settings_for(r, self.model_name)
        if used is not None or any(t.model is None for t in done):
            done = [self._record_settings(t, used, shape, r) for t in done]
        compacted = await step.run(done, state["conversation"], config)
        note = self._round_note(state, r, compacted, gate)
        self.tracer.compaction(run_id, step.name, compacted)
        self.tracer.end_round(run_id, compacted)
        progress_writer()(round_compacted(r, compacted))
        if not compacted or all(t.failed for t in compacted):
            errors = [t.error or "" for t in compacted]
            first = errors[0] if errors else "no explorer returned"
            raise RoundFailedError(
                f"round {r}: all {len(compacted)} explorer calls failed; first error: {first}",
                round_index=r,
                errors=errors,
            )
        update: dict[str, Any] = {
            "rounds": (*state["rounds"], compacted),
            "pending": None,
            "round": r + 1,
        }
        if note is not None:
            update["control"] = (*(state.get("control") or ()), note)
        schedule = self.run_schedule(state)
        last = len(schedule) - 1
        if self.early_stop is not None and r < last:
            stop = self._early_stop(self.early_stop, state, r, compacted)
            if stop is not None:
                update["stopped"] = stop
                update["round"] = len(schedule)  # route() goes to finalize
        return update

    async def _explore_again(
        self, state: PaCoReState, config: RunnableConfig, failed: list[Trajectory]
    ) -> list[Trajectory]:
        """The round's failed trajectories asked again (a resumed thread's failed round)."""
        again = {t.index for t in failed}
        tasks = [t for t in self.round_tasks(state) if t.index in again]
        r = state["round"]
        answer = self.answer is not None and self._answer_round(r, self.run_schedule(state))
        part = self.answer if answer and self.answer is not None else self.part
        if not tasks:
            return failed
        # Together, whatever the explorer: as a grouped round's explorers run.
        group: ExploreTask | ExploreGroup = tasks[0] if len(tasks) == 1 else ExploreGroup(tasks)
        return await self._explore_tasks(part, part.graph, group, config)

    def _compact_step(self, name: str) -> CompactStep:
        step = self._compact_steps.get(name)
        if step is None:
            step = self._compact_steps[name] = compact_step(self._compactor(name))
        return step

    def _record_settings(
        self, t: Trajectory, used: Mapping[str, Any] | None, shape: RunShape, r: int
    ) -> Trajectory:
        """``t`` saying what its round sent (when the round had its own) and its model."""
        model = t.model or shape.sampling_for(r).model or self.model_name
        if used is None:
            return t if model == t.model else replace(t, model=model)
        return replace(t, sampling=used, model=model)

    def _round_note(
        self,
        state: PaCoReState,
        r: int,
        compacted: tuple[Trajectory, ...],
        gate: RoundGate | None,
    ) -> dict[str, Any] | None:
        """What round control did to round r (None when it did nothing)."""
        planned = self.run_schedule(state)[r]
        width = state.get("width") or planned
        reason = state.get("width_reason")
        if gate is None and reason is None and width == planned:
            return None
        note: dict[str, Any] = {"round": r, "planned": planned, "width": width}
        if reason:
            note["width_reason"] = reason
        if gate is not None:
            ran = {t.index for t in compacted}
            note["finished"] = len(ran)
            note["dropped"] = [i for i in range(width) if i not in ran]
            if gate.reason:
                note["closed_by"] = gate.reason
        return note

    def _early_stop(
        self,
        early_stop: EarlyStop,
        state: PaCoReState,
        r: int,
        compacted: tuple[Trajectory, ...],
    ) -> dict[str, Any] | None:
        """The early-stop record when round r's answers agree enough, else None."""
        found = early_stop.check(compacted)
        if found is None or found.trajectory is None:
            return None
        rounds = (*state["rounds"], compacted)
        count = sum(len(rnd) for rnd in rounds)
        per_sample = sum(t.completion_tokens for rnd in rounds for t in rnd) / max(count, 1)
        skipped = list(self.run_schedule(state)[r + 1 :])
        return {
            "round": r,
            "threshold": early_stop.threshold,
            "answer": found.answer,
            "share": round(found.share, 4),
            "votes": found.votes,
            "chosen": found.trajectory.id,
            "skipped_widths": skipped,
            "tokens_saved_estimate": round(sum(skipped) * per_sample),
        }

    async def route(self, state: PaCoReState) -> str:
        """Next round, or the answer."""
        return "round" if state["round"] < len(self.run_schedule(state)) else "finalize"

    async def finalize(self, state: PaCoReState, config: RunnableConfig) -> dict[str, Any]:
        """The answer (the final round's message, or the aggregator's choice) and the record."""
        rounds = state["rounds"]
        self.tracer.resume(state["run_id"], state.get("trace"))  # no-op unless resumed
        shape = self.run_shape(state)
        sampling = shape.sampling.model_dump(mode="json")
        if sampling.get("model") is None:
            sampling.pop("model", None)
        details: dict[str, Any] = {"run_id": state["run_id"], "sampling": sampling}
        if shape.per_round is not None:
            details["round_settings"] = [
                shape.settings_for(i, self.model_name) for i in range(len(shape.per_round))
            ]
        spent = compaction_tokens(rounds)
        if spent is not None:
            details["compaction_tokens"] = spent
        final: Trajectory
        stopped = state.get("stopped")
        control = state.get("control")
        if control:
            details["round_control"] = list(control)
            details["widths_run"] = [len(rnd) for rnd in rounds]
        if stopped:
            final = next(t for t in rounds[-1] if t.id == stopped["chosen"])
            answer = final.message or ""
            details.update(early_stop=stopped, chosen=final.id)
        elif self.aggregator is None:
            final = next(t for t in rounds[-1] if not t.failed)
            answer = final.message or ""
            if self.answer is not None:  # an aggregator graph answered (its round of width 1)
                details.update(aggregator=self.answer.name, chosen=final.id)
        else:
            # Off the event loop: a vote over a thousand distinct answers is seconds of
            # CPU that would stall every other run, health check and signal of the
            # process; a cancelled run stops it at its next answer.
            verdict = await aggregate_off_loop(self.aggregator, rounds)
            final, answer = verdict.trajectory, verdict.answer
            details.update(aggregator=self.aggregator.name, chosen=final.id, **verdict.details)
        result = PaCoReResult(
            answer=answer,
            reasoning=final.reasoning,
            rounds=rounds,
            schedule=shape.schedule,
            problem_id=state.get("problem_id"),
            wall_s=time.time() - state["started"],
            model=self.model_name or final.model,
            preset=shape.preset,
            extra=details,
            conversation=tuple(state["conversation"]),
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

    def _schedule(self, cfg: PaCoReConfig) -> tuple[int, ...]:
        return cfg.schedule if self.aggregator is None else cfg.widths

    def run_shape(self, state: PaCoReState) -> RunShape:
        """This run's shape: the one its context set (kept in the state), else the graph's."""
        return state.get("settings") or self.shape

    def run_schedule(self, state: PaCoReState) -> tuple[int, ...]:
        """This run's round widths."""
        return self.run_shape(state).schedule

    def _compactor(self, name: str) -> Compactor:
        """A run's compactor by name, from the registry only (nothing is imported)."""
        try:
            return self.compactors.resolve(name)
        except ValueError as exc:
            raise SettingsError(f"configurable.compactor: {exc}") from None

    def pause_run(self, state: Any) -> None:
        """End the run's open spans as paused (a node raised LangGraph's ``GraphInterrupt``)."""
        run_id = (
            state.run_id if isinstance(state, (ExploreTask, ExploreGroup)) else state.get("run_id")
        )
        self.tracer.pause_run(run_id)

    def fail_run(self, state: Any, exc: BaseException) -> None:
        """End the run's open spans with an error (a node raised)."""
        run_id = (
            state.run_id if isinstance(state, (ExploreTask, ExploreGroup)) else state.get("run_id")
        )
        for key in [k for k in self._gates if k[0] == run_id]:
            del self._gates[key]
        self._explored = {k for k in self._explored if k[0] != run_id}
        self.tracer.fail_run(run_id, exc)


def _nested(checkpoint_ns: Any) -> bool:
    """Whether the graph runs inside a parent graph (its namespace has a parent's part)."""
    return isinstance(checkpoint_ns, str) and "|" in checkpoint_ns  # LangGraph's NS_SEP


def _legacy_plan(state: PaCoReState) -> RoundPrompts:
    """A thread saved before round plans kept its round's prompt as ``prompt``/``prompt_refs``."""
    legacy = cast(Mapping[str, Any], state)
    return RoundPrompts.shared(legacy["prompt"], legacy.get("prompt_refs") or ())
