"""graph/checkpoint_types: the types a PaCoRe checkpoint stores, and the serializer restoring them.

The serializer's bytes are compared with LangGraph's stock one (both ways),
records saved under older module paths (before the layer folders, before
``values/``) still load, and checkpointers of each kind get the types registered as documented.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import ormsgpack
import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Send

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.graph.checkpoint_types import (
    LEGACY_MODULES,
    SERDE_ALLOWLIST,
    pacore_serde,
    with_pacore_types,
)
from pacore_graph.graph.explorer import ExploreGroup, ExploreTask
from pacore_graph.settings.config import SamplingParams
from pacore_graph.values.records import Completion, ToolCallRecord, Trajectory


def test_allowlist_names_every_record_type() -> None:
    names = {name for _, name in SERDE_ALLOWLIST}
    assert {"Trajectory", "ToolCallRecord", "PaCoReResult", "ExploreTask"} <= names


def test_fast_serializer_writes_the_bytes_langgraph_would() -> None:
    """pacore_serde's fast path for records and Send must stay byte-compatible both ways."""
    traj = Trajectory(
        round=1,
        index=2,
        content="c",
        tool_calls=(ToolCallRecord(name="t", arguments={"a": 1}, output="o"),),
        token_ids=(1, 2),
        logprobs=[{"token": "a", "logprob": -0.5}],
    )
    value = {
        "rounds": ((traj,), (traj, Trajectory(round=2, index=0, error="boom"))),
        "send": Send("explore", {"x": traj}),
        "task": ExploreTask(
            run_id="r",
            problem_id=None,
            round=0,
            index=1,
            width=2,
            messages=({"role": "user", "content": "Q"},),
            params=SamplingParams(),
        ),
    }
    stock = JsonPlusSerializer(allowed_msgpack_modules=sorted(SERDE_ALLOWLIST))
    fast = pacore_serde()
    assert fast.dumps_typed(value) == stock.dumps_typed(value)
    back = stock.loads_typed(fast.dumps_typed(value))
    assert back["rounds"][1][1] == Trajectory(round=2, index=0, error="boom")
    assert back["task"] == value["task"]


def _round_tasks(width: int, prompt: str = "Q" * 2000) -> tuple[ExploreTask, ...]:
    """A round's fan-out: one prompt and one SamplingParams shared, index and seed apart."""
    messages = ({"role": "user", "content": prompt},)
    params = SamplingParams(temperature=0.7)
    return tuple(
        ExploreTask(
            run_id="r",
            problem_id="p",
            round=1,
            index=i,
            width=width,
            messages=messages,
            references=(2, 0, 1),
            seed=1000 + i,
            params=params,
        )
        for i in range(width)
    )


def test_a_round_group_is_written_with_its_shared_task_once() -> None:
    """Issue 22: K copies of the prompt were 40% of a durable run's bytes."""
    group = ExploreGroup(_round_tasks(32))
    fast, stock = (
        pacore_serde(),
        JsonPlusSerializer(allowed_msgpack_modules=sorted(SERDE_ALLOWLIST)),
    )
    kind, data = fast.dumps_typed(Send("explore", group))
    _, whole = stock.dumps_typed(Send("explore", group))  # LangGraph's own: every task whole
    assert data.count(b"Q" * 2000) == 1 and whole.count(b"Q" * 2000) == 32
    assert len(data) * 10 < len(whole)
    for reader in (fast, stock):  # LangGraph's serializer reads it too (the class takes both forms)
        back = reader.loads_typed((kind, data)).arg
        assert back == group and type(back.tasks) is tuple
        assert [(t.index, t.seed) for t in back.tasks] == [(i, 1000 + i) for i in range(32)]
        assert back.tasks[5].messages is back.tasks[17].messages  # one prompt in memory too
    assert fast.loads_typed(stock.dumps_typed(Send("explore", group))).arg == group


def test_a_group_whose_tasks_differ_beyond_index_and_seed_is_written_whole() -> None:
    tasks = _round_tasks(3)
    other = ExploreTask(
        run_id="r",
        problem_id="p",
        round=1,
        index=3,
        width=3,
        messages=({"role": "user", "content": "R"},),
    )
    for group in (
        ExploreGroup((*tasks, other)),
        ExploreGroup((tasks[0], replace(tasks[1], stream=True))),
    ):
        assert set(group.checkpoint_kwargs()) == {"tasks"}
        serde = pacore_serde()
        assert serde.loads_typed(serde.dumps_typed(group)) == group
    assert set(ExploreGroup(tasks).checkpoint_kwargs()) == {"shared", "varying"}
    with pytest.raises(ValueError, match="at least one task"):
        ExploreGroup(shared=tasks[0], varying=())


#: Each generation of module paths a checkpoint may have been written under.
GENERATIONS = {
    "before the layer folders": (
        "pacore_graph.records",
        "pacore_graph.explorer",
        "pacore_graph.state",
        "pacore_graph.config",
    ),
    "before values/": ("pacore_graph.graph.records",),
}


@pytest.mark.parametrize("generation", sorted(GENERATIONS))
def test_a_checkpoint_written_under_the_old_module_paths_still_loads(generation: str) -> None:
    """Records saved under older paths (``pacore_graph.records``, ...) load as today's."""
    old_path = {LEGACY_MODULES[old]: old for old in GENERATIONS[generation]}

    def to_old(code: int, data: bytes) -> ormsgpack.Ext:
        value = ormsgpack.unpackb(data, ext_hook=to_old, option=ormsgpack.OPT_NON_STR_KEYS)
        if isinstance(value, list) and value and isinstance(value[0], str):
            value[0] = old_path.get(value[0], value[0])
        return ormsgpack.Ext(code, ormsgpack.packb(value, option=ormsgpack.OPT_NON_STR_KEYS))

    traj = Trajectory(
        round=1,
        index=0,
        content="c",
        tool_calls=(ToolCallRecord(name="t", arguments={"a": 1}, output="o"),),
    )
    task = ExploreTask(
        run_id="r",
        problem_id=None,
        round=0,
        index=1,
        width=2,
        messages=({"role": "user", "content": "Q"},),
        params=SamplingParams(),
    )
    value = {"rounds": ((traj,),), "task": task}
    serde = pacore_serde()
    kind, data = serde.dumps_typed(value)
    old = ormsgpack.packb(
        ormsgpack.unpackb(data, ext_hook=to_old, option=ormsgpack.OPT_NON_STR_KEYS),
        option=ormsgpack.OPT_NON_STR_KEYS,
    )
    assert GENERATIONS[generation][0].encode() in old
    assert b"pacore_graph.values.records" not in old
    wider = serde.with_msgpack_allowlist([("example", "Extra")])  # what a saver's allowlist makes
    for reader in (serde, wider):
        back = reader.loads_typed((kind, old))
        assert back["rounds"][0][0] == traj
        assert back["task"] == task


class Extra:
    """A type of the user's own, for the serializer's ``extra``."""

    def __init__(self, value: int) -> None:
        self.value = value


def test_pacore_serde_allows_exactly_its_types_plus_the_extra_ones() -> None:
    key = (Extra.__module__, Extra.__name__)
    assert key not in SERDE_ALLOWLIST
    by_type = pacore_serde([Extra])._allowed_msgpack_modules
    by_key = pacore_serde([key])._allowed_msgpack_modules
    assert set(by_type) == set(by_key) == set(SERDE_ALLOWLIST) | {key}
    assert set(pacore_serde()._allowed_msgpack_modules) == set(SERDE_ALLOWLIST)


@pytest.mark.parametrize("flag", [None, True, False])
def test_a_subgraphs_checkpointer_flag_passes_through(flag: bool | None) -> None:
    assert with_pacore_types(flag) is flag


def test_a_saver_on_the_default_serializer_gets_pacore_serde_and_is_not_changed() -> None:
    saver = InMemorySaver()
    typed = with_pacore_types(saver)
    assert typed is not saver and type(saver.serde) is JsonPlusSerializer
    assert set(typed.serde._allowed_msgpack_modules) == set(SERDE_ALLOWLIST)
    traj = Trajectory(round=0, index=0, content="c")
    assert typed.serde.loads_typed(typed.serde.dumps_typed(traj)) == traj


def test_a_saver_with_an_allowlist_gets_pacore_types_added_to_it() -> None:
    key = (Extra.__module__, Extra.__name__)
    saver = InMemorySaver(serde=JsonPlusSerializer(allowed_msgpack_modules=[key]))
    allowed = set(with_pacore_types(saver).serde._allowed_msgpack_modules)
    assert key in allowed and set(SERDE_ALLOWLIST) <= allowed


class OneAnswer:
    """A model client answering every call the same; what is checked is what gets saved."""

    model = "one"

    async def complete(
        self, messages: Any, *, n: int = 1, params: SamplingParams, seed: int | None = None
    ) -> list[Completion]:
        return [Completion(content=f"seed {seed}", completion_tokens=1)] * n


async def test_a_graph_built_with_a_default_saver_checkpoints_without_unregistered_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = PaCoReConfig(rounds=[2, 1], batch_samples=False, sampling={"seed": 0})
    graph = build_pacore_graph(OneAnswer(), config=config, checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t"}}
    with caplog.at_level(logging.WARNING):
        await graph.ainvoke({"messages": [HumanMessage("Q?")]}, thread)
        history = [s async for s in graph.aget_state_history(thread)]
    assert any(s.tasks for s in history)  # the Send payloads (ExploreTask) were saved and read
    assert not [r for r in caplog.records if "unregistered type" in r.getMessage()]
