"""The explorer journal: a durable run's record of what each explorer call returned.

A durable dataset run (``pacore run --input``) must not ask a model again
for a sample whose answer had come back before a crash. LangGraph's
checkpoints guarantee that by saving the graph's state at every step, and
issue 22 measured what that costs: LangGraph's per-step checkpointing alone,
with a saver that stores nothing, took 1.054x the wall of a run without
checkpoints. The journal keeps the guarantee for a graph whose only model
calls are its explorers (:data:`~pacore_graph.runs.runner.PACORE_MODEL_NODES`)
without checkpointing the graph at all:

- the ``explore`` node, before calling a model, looks its tasks up in the
  journal; a hit returns the trajectories recorded for them and calls
  nothing;
- a miss runs the explorers and records what they returned (a failed
  trajectory beside successful ones too, as a checkpoint's pending writes
  did; a call that returned nothing usable is not recorded and is asked
  again) before the node returns, so a sample that came back is in the
  journal before anything that depends on it happens;
- a resume runs the problem's graph again from its input: the cheap,
  deterministic steps (prepare, the round's prompt, compaction, the
  answer) are recomputed and every explorer call that had come back is
  answered from the journal, so the samples asked again are at most those
  in flight at the crash.

Entries are keyed by what the call depends on (:func:`journal_key`): the
round, the explorers' indices, seeds and references, the prompt, the
sampling settings (a round's own model included) and what the round's plan
gave each explorer (``extras``), but not the run id, which is drawn afresh
at each start, nor the run's trace.
A call whose inputs changed (other settings on a re-run) misses and is
made again.

The node finds the journal in its config (:func:`journal_of`): run control
(:mod:`pacore_graph.runs.fanout`) puts a :class:`JournalScope` there, its
thread being the problem's. This module is the graph's side only; the
SQLite store implements :class:`ExplorerJournal`
(:mod:`pacore_graph.runs.checkpoint`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from langchain_core.runnables import RunnableConfig

from pacore_graph.graph.explorer import ExploreGroup, ExploreTask
from pacore_graph.values.records import Trajectory

__all__ = [
    "JOURNAL_CONFIG_KEY",
    "ExplorerJournal",
    "JournalScope",
    "journal_key",
    "journal_of",
]

#: The ``configurable`` key under which a run's :class:`JournalScope` reaches its nodes.
JOURNAL_CONFIG_KEY = "pacore_journal"


@runtime_checkable
class ExplorerJournal(Protocol):
    """A durable store of explorer results, one entry per (thread, key)."""

    async def journal_replay(self, thread: str, key: str) -> tuple[Trajectory, ...] | None:
        """The trajectories recorded under ``key`` for ``thread``, or None."""
        ...

    async def journal_record(
        self, thread: str, key: str, trajectories: Sequence[Trajectory]
    ) -> None:
        """Record ``trajectories`` under ``key``; returns once they are durable."""
        ...


@dataclass(frozen=True, slots=True)
class JournalScope:
    """One problem's view of a journal: its thread, fixed for the run."""

    journal: ExplorerJournal
    thread: str

    async def replay(self, key: str) -> tuple[Trajectory, ...] | None:
        return await self.journal.journal_replay(self.thread, key)

    async def record(self, key: str, trajectories: Sequence[Trajectory]) -> None:
        """Journal a call's trajectories, unless every one failed (or none came back).

        A call with nothing usable is asked again on a resume: the round it
        belongs to failed, and a failed problem starts afresh.
        """
        if any(not t.failed for t in trajectories):
            await self.journal.journal_record(self.thread, key, trajectories)


def journal_of(config: RunnableConfig | None) -> JournalScope | None:
    """The journal scope a run was given in its config, if any."""
    configurable: Mapping[str, Any] = (config or {}).get("configurable") or {}
    scope = configurable.get(JOURNAL_CONFIG_KEY)
    return scope if isinstance(scope, JournalScope) else None


def journal_key(task: ExploreTask | ExploreGroup) -> str:
    """The key of an explorer call: a digest of everything its answer depends on.

    Not the run id (a resumed problem draws a new one) and not ``stream``
    (how the final answer is delivered, not what it is). ``repr`` is exact
    and stable here: the prompt is dicts and strings built in a fixed order;
    the settings are written as their JSON.
    """
    tasks = task.tasks if isinstance(task, ExploreGroup) else (task,)
    first = tasks[0]
    digest = hashlib.blake2b(digest_size=16)
    digest.update(
        repr(
            [(t.problem_id, t.round, t.index, t.width, t.seed, t.references) for t in tasks]
        ).encode("utf-8", "surrogatepass")
    )
    # A round's tasks share one prompt and one settings object: each written once, then
    # marked "same" (compared by identity first, so the K-1 others cost nothing).
    previous: tuple[Any, Any, Any] | None = None
    for t in tasks:
        if (
            previous is not None
            and _same(t.messages, previous[0])
            and _same(t.params, previous[1])
            and _same(t.extras, previous[2])
        ):
            digest.update(b"\0=")
        else:
            # pydantic's JSON for the settings: its repr was a third of the key's cost
            settings = "" if t.params is None else t.params.model_dump_json()
            given: tuple[Any, ...] = (settings, t.messages)
            if t.extras:  # what the round's plan gave this explorer (a bar, trajectories)
                given = (*given, sorted(t.extras.items()))
            digest.update(b"\0" + repr(given).encode("utf-8", "surrogatepass"))
        previous = (t.messages, t.params, t.extras)
    return f"{first.round}:{digest.hexdigest()}"


def _same(a: Any, b: Any) -> bool:
    return a is b or a == b
