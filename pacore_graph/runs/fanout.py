"""One resumable fan-out of graph runs, shared by ``pacore run --input`` and ``pacore eval``.

Both run many problems concurrently through one compiled graph and append
one line per finished problem to a results file. This module is the part
they share: a bounded number of runs in flight, each on its own
checkpointer thread, so a run killed half-way (SIGKILL, a crash, a closed
laptop) continues where it stopped when the same command runs again:

- a thread with a checkpoint that can go on is *resumed* (``ainvoke(None)``):
  LangGraph re-runs only the tasks whose writes were not saved, so explorers
  whose responses had come back are not called again;
- a thread whose last attempt raised (every explorer of a round failed, a
  bad problem) starts again from scratch, as a failed problem always did;
- a thread that finished but whose line was never written gives its result
  without running anything;
- once the caller has written a run's line, its thread is deleted: the
  results file is the record, the checkpoints only bridge a crash.

With ``model_nodes`` (the graph's only model-calling nodes, ``pacore run
--input``'s PaCoRe graph) and a store that keeps an explorer journal (the
SQLite one), a run is not checkpointed step by step at all: it runs from its
input with the journal in its config (:mod:`pacore_graph.graph.journal`),
each explorer call's results recorded as they come back, and a resume runs
it again from its input, every recorded call answered from the journal.
LangGraph's per-step checkpointing alone cost more than issue 22's budget
for a durable run (1.054x the wall of none, ``docs/durable-runs.md``). The
same three cases hold: a resumed run asks only the calls in flight at the
kill again, a failed one starts afresh (its journal goes with its line),
and a finished one whose line was never written is answered wholly from
the journal. A thread that has LangGraph checkpoints (a file from before
the journal) resumes from them as below.

What a line looks like and which runs are already done is the caller's
business (``on_done`` and the ``jobs`` it passes).

A failure that is not one run's but the whole fan-out's -- the checkpoint
store gone (:class:`~pacore_graph.runs.store_guard.StoreError`), or ``on_done``
unable to write its line (a full disk) -- stops every run still going and is
raised, alone, to the caller: no run is recorded as failed for it, and no
task is left behind to report it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig

from pacore_graph.graph.journal import JOURNAL_CONFIG_KEY, ExplorerJournal, JournalScope
from pacore_graph.runs.checkpoint import DEFAULT_DURABILITY, CheckpointDurability, with_checkpointer
from pacore_graph.runs.store_guard import StoreError
from pacore_graph.values.records import PaCoReResult

__all__ = ["Job", "OnDone", "run_jobs"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """One graph run: its checkpointer thread id and its input state."""

    thread_id: str
    state: Mapping[str, Any]
    payload: Any = field(default=None, compare=False)
    """Whatever the caller needs back in ``on_done`` (a dataset record, a sample index)."""


#: Called once per job, with its result or the exception its run raised.
OnDone = Callable[[Job, PaCoReResult | None, BaseException | None], Awaitable[None]]


async def run_jobs(
    graph: Any,
    jobs: Iterable[Job],
    on_done: OnDone,
    *,
    max_in_flight: int,
    checkpointer: Any = None,
    durability: CheckpointDurability = DEFAULT_DURABILITY,
    model_nodes: Collection[str] | None = None,
) -> None:
    """Run every job, at most ``max_in_flight`` at once; see the module docstring.

    ``model_nodes``: the graph's nodes that call a model (the PaCoRe graph's
    ``explore``), when known; a saver that can (the SQLite one) then writes
    only the checkpoints before them, and a resume redoes the cheap steps in
    between (:mod:`pacore_graph.runs.checkpoint`); a saver with an explorer
    journal is used as one instead (see the module docstring).
    """
    gate = asyncio.Semaphore(max(1, max_in_flight))
    runner = graph if checkpointer is None else with_checkpointer(graph, checkpointer)
    saver = None if checkpointer is None else runner.checkpointer
    if saver is not None and model_nodes is not None and hasattr(saver, "checkpoint_before"):
        saver.checkpoint_before = frozenset(model_nodes)
    # Journaled runs: the graph runs unchecked, its explorers' results journaled.
    journal = saver if model_nodes is not None and _can_journal(saver) else None
    unchecked = with_checkpointer(graph, None) if journal is not None else graph

    stopping = asyncio.Event()  # set by the failure that stops the fan-out

    async def one(job: Job) -> None:
        async with gate:
            try:
                if saver is None:
                    out = await runner.ainvoke(dict(job.state))
                elif journal is not None and not journal.has_checkpoints(job.thread_id):
                    out = await _journaled(unchecked, journal, job)
                else:
                    out = await _durable(runner, saver, job, durability)
                result = out["result"]
                if not isinstance(result, PaCoReResult):
                    raise TypeError(f"the graph returned {type(result).__name__}, not a result")
            except StoreError:
                stopping.set()
                raise
            except Exception as exc:
                if stopping.is_set():
                    raise  # a consequence of the stop, not this run's failure: no line
                await _finish(job, None, exc)
            else:
                await _finish(job, result, None)

    async def _finish(job: Job, result: PaCoReResult | None, exc: BaseException | None) -> None:
        try:
            await on_done(job, result, exc)
            if saver is not None:
                await saver.adelete_thread(job.thread_id)
        except BaseException:
            stopping.set()
            raise

    try:
        async with asyncio.TaskGroup() as group:
            for job in jobs:
                group.create_task(one(job))
    except BaseExceptionGroup as failed:
        raise _first(failed) from None


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The exception that stopped the fan-out (the others are its consequences)."""
    first = group.exceptions[0]
    return _first(first) if isinstance(first, BaseExceptionGroup) else first


def _can_journal(saver: Any) -> bool:
    """Whether ``saver`` keeps an explorer journal and knows which threads have checkpoints."""
    return isinstance(saver, ExplorerJournal) and callable(getattr(saver, "has_checkpoints", None))


async def _journaled(graph: Any, journal: Any, job: Job) -> Any:
    """Run ``job`` from its input, its explorer calls answered from or recorded in ``journal``."""
    scope = JournalScope(journal, job.thread_id)
    config: RunnableConfig = {
        "configurable": {"thread_id": job.thread_id, JOURNAL_CONFIG_KEY: scope}
    }
    return await graph.ainvoke(dict(job.state), config)


async def _durable(graph: Any, saver: Any, job: Job, durability: CheckpointDurability) -> Any:
    config: RunnableConfig = {"configurable": {"thread_id": job.thread_id}}
    snapshot = await graph.aget_state(config)
    if snapshot.values:
        if not snapshot.next and "result" in snapshot.values:
            return snapshot.values  # finished before the line was written
        if snapshot.next and not any(task.error for task in snapshot.tasks):
            return await graph.ainvoke(None, config, durability=durability)
        await saver.adelete_thread(job.thread_id)  # it failed last time: start over
    return await graph.ainvoke(dict(job.state), config, durability=durability)
