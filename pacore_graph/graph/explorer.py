"""Explorers: what runs for each of the K parallel trajectories of a round.

The round node sends each explorer an :class:`ExploreTask` (its round, index,
its prompt -- P(x, M), shared by the round, or its own when the round's plan
gives one per explorer -- its round's sampling, a seed and the plan's
``extras``); the explorer returns a
:class:`~pacore_graph.values.records.Trajectory`. Failures are *recorded*: an
explorer returns a trajectory with ``error`` set, and whatever one raises
anyway is recorded the same way by the node, so one bad call never sinks its
siblings. What else may explore (any graph with a ``messages`` state) is
:mod:`pacore_graph.graph.explorer_parts`'s.

- :class:`ChatExplorer` is the plain explorer, one chat call. It runs as a
  plain LangGraph node rather than a one-node compiled subgraph because a
  subgraph costs about 3x the scheduling per ``Send`` (measured in
  ``benchmarks/``), and a PaCoRe run sends thousands.
- :class:`ExploreGroup` is the ``Send`` payload when the plain explorer's
  calls are ``n``-batched: the K explorers of a round go to the ``explore``
  node together, and :meth:`ChatExplorer.explore_round` sends their one
  ``n=K`` request from the node's own task (each explorer keeps its own
  asyncio task for its span, its round gate and its record). Their samples
  come back in one response anyway, so K LangGraph tasks would buy nothing
  (no earlier results, no finer-grained pending writes) and cost about
  0.3 ms of scheduling and 15 KB of task state each.
- :class:`GraphExplorer` plugs in any compiled LangGraph graph (for example a
  model <-> tool loop) whose input has a ``task`` key and whose output has a
  ``trajectory`` key; it runs as a real subgraph, with its own steps visible
  in ``astream(subgraphs=True)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from functools import partial
from typing import Any, Protocol, runtime_checkable

from langchain_core.runnables import RunnableConfig

from pacore_graph.control.confidence import compact_logprobs
from pacore_graph.errors import ModelCallError
from pacore_graph.graph.streaming import (
    StreamingChatClient,
    TokenStream,
    answer_message_id,
    wants_tokens,
)
from pacore_graph.llm.batching import SampleBatcher
from pacore_graph.llm.shared_request import SharedRequest
from pacore_graph.otel.spans import record_call_error, record_chat_request, record_chat_response
from pacore_graph.settings.config import SamplingParams
from pacore_graph.values.records import Trajectory

__all__ = [
    "ChatExplorer",
    "ExploreGroup",
    "ExploreTask",
    "Explorer",
    "GraphExplorer",
    "OneExplorer",
    "failed_trajectory",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExploreTask:
    """What one explorer is asked to do: the ``Send`` payload of a round.

    ``messages`` is the same tuple object for all K explorers of a round when
    they share a prompt (no copies); ``references`` are the previous-round
    indices of the messages in it, in prompt order. ``width`` is how many
    explorers share this prompt (the ``n`` of its request): K for a shared
    prompt, 1 for an explorer with its own.
    """

    run_id: str
    problem_id: str | None
    round: int
    index: int
    width: int
    messages: tuple[Mapping[str, Any], ...]
    references: tuple[int, ...] = ()
    seed: int | None = None
    stream: bool = False
    """The final K=1 round: its tokens stream when a ``messages`` stream listens."""
    params: SamplingParams | None = None
    """What this task's round sends (the run's sampling with the round's own settings): set
    by the fan-out; ``None`` only for a task built by hand, which then uses the batcher's."""
    extras: Mapping[str, Any] = field(default_factory=dict)
    """What the round's plan gave this explorer besides its prompt (``ExplorerPrompt.extras``:
    e.g. online DeepConf's confidence bar, the trajectories an aggregator graph reads)."""
    trace: tuple[str, str] | None = None
    """The run's first root span (hex trace and span id) when traced: the spans of an
    explorer resumed after a pause stay in the run's trace."""

    def __post_init__(self) -> None:
        # A checkpointed Send comes back with lists (msgpack); keep the tuples.
        if type(self.messages) is not tuple:
            object.__setattr__(self, "messages", tuple(self.messages))
        if type(self.references) is not tuple:
            object.__setattr__(self, "references", tuple(self.references))

    @property
    def group(self) -> tuple[str, int]:
        """Explorers of one round share a prompt, and so a batch."""
        return (self.run_id, self.round)


@dataclass(frozen=True, slots=True, init=False)
class ExploreGroup:
    """The explorers of one round sent as one ``Send`` (see the module docstring).

    Each task keeps its own index and seed; records, spans and stream events
    stay per trajectory.

    A checkpoint writes the group as :meth:`checkpoint_kwargs` gives it: when
    its tasks differ only in index and seed (a round's fan-out), the task
    once and the ``(index, seed)`` pairs, not K copies of the prompt and the
    sampling settings (issue 22: at ``high`` the K copies were 40% of a
    durable run's bytes). ``ExploreGroup(shared=..., varying=...)`` rebuilds
    it, so LangGraph's own serializer, which calls the class with the
    written keywords, reads it too.
    """

    tasks: tuple[ExploreTask, ...]

    def __init__(
        self,
        tasks: Iterable[ExploreTask] = (),
        *,
        shared: ExploreTask | None = None,
        varying: Iterable[Sequence[Any]] = (),
    ) -> None:
        if shared is not None:
            tasks = tuple(replace(shared, index=int(i), seed=seed) for i, seed in varying)
        tasks = tuple(tasks)  # restored from a checkpoint as a list
        if not tasks:
            raise ValueError("an ExploreGroup needs at least one task")
        object.__setattr__(self, "tasks", tasks)

    @property
    def run_id(self) -> str:
        return self.tasks[0].run_id

    @property
    def round(self) -> int:
        return self.tasks[0].round

    def checkpoint_kwargs(self) -> dict[str, Any]:
        """The keywords a checkpoint stores: the shared task once when it can (see above)."""
        first, *rest = self.tasks
        if all(_same_but_index_and_seed(task, first) for task in rest):
            return {"shared": first, "varying": [(task.index, task.seed) for task in self.tasks]}
        return {"tasks": self.tasks}


#: The fields the tasks of a round share (all but index and seed), from the class:
#: a field added to ExploreTask is compared too, never silently dropped from a checkpoint.
_SHARED_FIELDS: tuple[str, ...] = tuple(
    f.name for f in fields(ExploreTask) if f.name not in ("index", "seed")
)


def _same_but_index_and_seed(a: ExploreTask, b: ExploreTask) -> bool:
    """Whether two tasks differ at most in index and seed (shared objects compared first)."""
    for name in _SHARED_FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if x is not y and x != y:
            return False
    return True


@runtime_checkable
class Explorer(Protocol):
    """Produces one trajectory for one task; must not raise for a failed model call."""

    async def explore(self, task: ExploreTask, config: RunnableConfig) -> Trajectory: ...


def failed_trajectory(
    task: ExploreTask, error: BaseException | str, latency_s: float = 0.0
) -> Trajectory:
    """The record of an explorer whose call failed: error kept, no message.

    A model call's error is its own text (it names the status or the kind);
    any other exception is prefixed with its class, which is what says what
    went wrong (``KeyError: 'x'``).
    """
    if isinstance(error, str):
        text = error
    elif isinstance(error, ModelCallError):
        text = str(error)
    else:
        text = f"{type(error).__name__}: {error}"
    return Trajectory(
        round=task.round,
        index=task.index,
        error=text,
        references=task.references,
        latency_s=latency_s,
    )


#: How the node runs one explorer's call: in its span, through the round's gate, its
#: failure recorded (None: round control dropped it).
OneExplorer = Callable[
    [ExploreTask, Callable[[], Awaitable[Trajectory]]], Coroutine[Any, Any, Trajectory | None]
]


@dataclass(frozen=True, slots=True)
class ChatExplorer:
    """The plain explorer: one sample of the round's prompt.

    In a PaCoRe graph a round's explorers run through :meth:`explore_round`
    (one ``n=K`` request, sent by the node); :meth:`explore` is one task on
    its own, which the batcher joins with its siblings when they arrive
    apart.
    """

    batcher: SampleBatcher

    async def explore(self, task: ExploreTask, config: RunnableConfig) -> Trajectory:
        seed = task.seed  # this explorer's own (pacore_graph.values.seeds), batched or not
        record_chat_request(self.batcher.client, seed=seed)  # on this explorer's span
        try:
            if task.stream and wants_tokens(config):
                c = await self._stream(task, config, seed)
            else:
                c = await self.batcher.sample(
                    task.messages,
                    group=task.group,
                    expected=task.width,
                    seed=seed,
                    params=task.params,
                )
        except ModelCallError as exc:
            record_call_error(exc)  # the span's error.type: status or kind, not the text
            return failed_trajectory(task, str(exc))
        return self._trajectory(task, c)

    async def explore_round(
        self, tasks: Sequence[ExploreTask], config: RunnableConfig, each: OneExplorer
    ) -> list[Trajectory]:
        """A round's explorers: the ones sharing its prompt get one request, sent from here.

        ``each`` is the node's wrapper of one explorer's call (span, gate,
        failure record); each explorer awaits its own sample in a task of
        its own while this task sends the request, so the POST is a plain
        call down from the explore node. An explorer with a prompt of its
        own (``width`` 1) is one call, as :meth:`explore` makes it.
        """
        shared = [t for t in tasks if t.width > 1 and t.messages is tasks[0].messages]
        request: SharedRequest | None = None
        if len(shared) > 1:
            first = shared[0]
            request = self.batcher.shared(
                first.messages,
                [t.seed for t in shared],
                params=first.params,
                label=_round_label(first, shared),
            )
        slot = {t.index: i for i, t in enumerate(shared)} if request is not None else {}
        try:
            async with asyncio.TaskGroup() as tg:  # an error in one cancels its siblings
                runs: list[asyncio.Task[Trajectory | None]] = []
                for t in tasks:
                    i = slot.get(t.index)
                    call = (
                        partial(self.explore, t, config)
                        if request is None or i is None
                        else partial(self._shared_sample, t, request, i)
                    )
                    run = tg.create_task(each(t, call))
                    if request is not None and i is not None:
                        # Dropped or failed before it asked: its sample is given up too.
                        run.add_done_callback(partial(_give_up, request.futures[i]))
                    runs.append(run)
                if request is not None:
                    await request.send()
        except BaseExceptionGroup as errors:  # raised as a lone explorer would raise it
            raise errors.exceptions[0] from None
        return [done for run in runs if (done := run.result()) is not None]

    async def _shared_sample(self, task: ExploreTask, request: SharedRequest, i: int) -> Trajectory:
        """Explorer ``task``'s sample of the round's request (its error raised, for the node)."""
        record_chat_request(self.batcher.client, seed=task.seed)  # on this explorer's span
        return self._trajectory(task, await request.result(i))

    def _trajectory(self, task: ExploreTask, c: Any) -> Trajectory:
        if c.seed is not None and c.seed != task.seed:
            # Batched: the span says the seed the shared n-sample request carried.
            record_chat_request(self.batcher.client, seed=c.seed)
        record_chat_response(c.model)
        return Trajectory(
            round=task.round,
            index=task.index,
            content=c.content,
            reasoning=c.reasoning,
            finish_reason=c.finish_reason,
            prompt_tokens=c.prompt_tokens,
            completion_tokens=c.completion_tokens,
            latency_s=c.latency_s,
            references=task.references,
            tokens_estimated=c.tokens_estimated,
            logprobs=compact_logprobs(c.logprobs),
            token_ids=c.token_ids,
            model=c.model,
        )

    async def _stream(self, task: ExploreTask, config: RunnableConfig, seed: int | None) -> Any:
        """The final call over SSE, its deltas reported as LangChain token events."""
        client = self.batcher.client
        if not isinstance(client, StreamingChatClient):
            return await self.batcher.sample(
                task.messages, group=task.group, expected=1, seed=seed, params=task.params
            )
        params = task.params or self.batcher.params
        tokens = TokenStream(
            config, message_id=answer_message_id(task.run_id), model=params.model or client.model
        )
        await tokens.start(task.messages)
        completion = None
        try:
            async with self.batcher.limiter.hold(1):
                completion = await client.stream(
                    task.messages,
                    params=params,
                    seed=seed,
                    on_delta=tokens.on_delta,
                )
        except BaseException as exc:
            await tokens.end(None, exc)
            raise
        await tokens.end(completion, None)
        return completion


def _give_up(future: asyncio.Future[Any], _: object) -> None:
    future.cancel()  # a no-op once the sample arrived


def _round_label(first: ExploreTask, shared: Sequence[ExploreTask]) -> str:
    """Who sends a round's request, for its errors' notes (see SharedRequest)."""
    indices = sorted(t.index for t in shared)
    span = (
        f"{indices[0]}-{indices[-1]}"
        if indices == list(range(indices[0], indices[-1] + 1))
        else ",".join(map(str, indices))
    )
    return (
        f"the explore node's n={len(shared)} request for round {first.round} of run "
        f"{first.run_id} (ChatExplorer.explore_round, explorers {span})"
    )


@dataclass(frozen=True, slots=True)
class GraphExplorer:
    """Runs a compiled LangGraph graph per trajectory: ``{"task"}`` in, ``{"trajectory"}`` out.

    In a PaCoRe graph it becomes a real subgraph of the ``explore`` node: its
    nodes show in ``get_graph(xray=True)``, its steps stream with
    ``astream(subgraphs=True)`` and are checkpointed with the parent's.
    ``release(task)``, if given, is awaited when the trajectory is done,
    whatever happened (the tool explorer closes its workspace there).
    """

    graph: Any
    release: Callable[[ExploreTask], Awaitable[None]] | None = None

    def __post_init__(self) -> None:
        if not hasattr(self.graph, "ainvoke"):
            raise TypeError("GraphExplorer needs a compiled LangGraph graph (with ainvoke)")

    @property
    def name(self) -> str:
        """The explorer graph's name (traces show ``invoke_agent {name}``)."""
        return str(getattr(self.graph, "name", None) or "explorer")

    def trajectory_of(self, out: Any) -> Trajectory:
        """The ``trajectory`` the explorer graph returned; TypeError if it returned none."""
        trajectory = out.get("trajectory") if isinstance(out, Mapping) else None
        if not isinstance(trajectory, Trajectory):
            raise TypeError(
                "an explorer graph must return a 'trajectory' key holding a Trajectory; "
                f"got keys {sorted(out) if isinstance(out, Mapping) else type(out).__name__}"
            )
        return trajectory

    async def explore(self, task: ExploreTask, config: RunnableConfig) -> Trajectory:
        try:
            out = await self.graph.ainvoke({"task": task}, config)
        except ModelCallError as exc:
            record_call_error(exc)  # the span's error.type: status or kind, not the text
            return failed_trajectory(task, str(exc))
        finally:
            if self.release is not None:
                await self.release(task)
        return self.trajectory_of(out)
