"""graph/journal: the explorer journal's key and a problem's scope of it.

The key must see everything an explorer call's answer depends on and
nothing that changes between a run and its resume (the run id); the scope
must not journal a call that returned nothing usable. The journal itself
(the SQLite store, resumes) is ``tests/runs/test_journaled_runs.py``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pacore_graph.graph.explorer import ExploreGroup, ExploreTask
from pacore_graph.graph.journal import JournalScope, journal_key, journal_of
from pacore_graph.settings.config import SamplingParams
from pacore_graph.values.records import Trajectory


def _task(**change: Any) -> ExploreTask:
    fields: dict[str, Any] = {
        "run_id": "run-a",
        "problem_id": "p",
        "round": 1,
        "index": 0,
        "width": 2,
        "messages": ({"role": "user", "content": "Q?"},),
        "references": (0, 1),
        "seed": 1000,
        "params": SamplingParams(temperature=1.0),
    }
    return ExploreTask(**{**fields, **change})


def test_the_key_ignores_the_run_id_and_sees_everything_the_answer_depends_on() -> None:
    base = journal_key(_task())
    assert journal_key(_task(run_id="run-b")) == base  # a resume draws a new run id
    assert journal_key(_task(stream=True)) == base  # how the answer is delivered
    for change in (
        {"round": 2},
        {"index": 1},
        {"seed": 1001},
        {"width": 3},
        {"references": (1, 0)},
        {"problem_id": "q"},
        {"messages": ({"role": "user", "content": "Q!"},)},
        {"params": SamplingParams(temperature=0.5)},
        {"params": SamplingParams(temperature=1.0, model="small")},  # a round's own model
        {"params": SamplingParams(temperature=1.0, max_tokens=64)},
    ):
        assert journal_key(_task(**change)) != base, change
    assert base.startswith("1:")


def test_a_groups_key_depends_on_its_prompts_not_on_their_identity() -> None:
    prompt = ({"role": "user", "content": "Q?"},)
    shared = ExploreGroup([_task(index=i, messages=prompt) for i in range(2)])
    copies = ExploreGroup(
        [_task(index=i, messages=tuple(dict(m) for m in prompt)) for i in range(2)]
    )
    other = ExploreGroup(
        [_task(index=0), _task(index=1, messages=({"role": "user", "content": "x"},))]
    )
    assert journal_key(shared) == journal_key(copies)
    assert journal_key(other) != journal_key(shared)
    # Settings that differ on a later task count too, not only the first task's.
    cooler = SamplingParams(temperature=0.5)
    mixed = ExploreGroup([_task(index=0, messages=prompt), _task(index=1, params=cooler)])
    assert journal_key(mixed) != journal_key(shared)


class DictJournal:
    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], tuple[Trajectory, ...]] = {}

    async def journal_replay(self, thread: str, key: str) -> tuple[Trajectory, ...] | None:
        return self.rows.get((thread, key))

    async def journal_record(self, thread: str, key: str, found: Sequence[Trajectory]) -> None:
        self.rows[(thread, key)] = tuple(found)


async def test_a_call_that_returned_nothing_usable_is_not_journaled() -> None:
    journal = DictJournal()
    scope = JournalScope(journal, "t")
    failed = Trajectory(round=0, index=0, error="500")
    await scope.record("k1", [failed])
    await scope.record("k2", [])
    assert journal.rows == {}
    ok = Trajectory(round=0, index=1, content="x")
    await scope.record("k3", [failed, ok])  # a failure beside an answer is kept, as it was
    assert await scope.replay("k3") == (failed, ok)


def test_the_scope_is_found_in_a_runs_config_only_when_given() -> None:
    scope = JournalScope(DictJournal(), "t")
    assert journal_of({"configurable": {"pacore_journal": scope}}) is scope
    assert journal_of({"configurable": {"thread_id": "t"}}) is None
    assert journal_of({"configurable": {"pacore_journal": "not a scope"}}) is None
    assert journal_of(None) is None
