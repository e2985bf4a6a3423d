"""Checkpointed PaCoRe runs: savers, registered types, resuming from pending writes.

A run is stopped while one explorer of round 0 is still waiting for its
model; the run is then resumed on the same thread with a *new* graph and a
*new* client, which must be asked only for what was not saved: the one
missing explorer and the rounds after it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from durable_support import SeedClient, saved_tasks
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.runs.checkpoint import open_checkpointer, pacore_serde
from pacore_graph.values.records import PaCoReResult, Trajectory

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG = PaCoReConfig(rounds=[4, 2], batch_samples=False, sampling={"seed": 0})


@asynccontextmanager
async def saver_for(kind: str, tmp_path: Path) -> AsyncIterator[Any]:
    spec = {"memory": "memory", "sqlite": f"sqlite:///{tmp_path / 'ck.sqlite'}"}[kind]
    async with open_checkpointer(spec, tmp_path / "unused.sqlite") as saver:
        yield saver


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_resume_calls_only_the_explorers_whose_results_were_not_saved(
    kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    thread = {"configurable": {"thread_id": "problem-1"}}
    question = {"messages": [{"role": "user", "content": "Q?"}], "problem_id": "p1"}
    async with saver_for(kind, tmp_path) as saver:
        first = SeedClient(hold=frozenset({2}))
        graph = build_pacore_graph(first, config=CONFIG, checkpointer=saver)
        run = asyncio.create_task(graph.ainvoke(question, thread, durability="async"))
        await saved_tasks(graph, thread, want=3)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert first.answered == 3

        second = SeedClient()
        resumed = build_pacore_graph(second, config=CONFIG, checkpointer=saver)
        with caplog.at_level(logging.WARNING):
            out = await resumed.ainvoke(None, thread)
    # Round 0: only the explorer with seed 2 again; then rounds 1 (seeds 1000, 1001) and 2.
    assert second.seeds == [2, 1000, 1001, 2000]
    result = out["result"]
    assert isinstance(result, PaCoReResult)
    assert [len(r) for r in result.rounds] == [4, 2, 1]
    assert all(isinstance(t, Trajectory) for t in result.trajectories)
    assert [t.content for t in result.rounds[0]] == [f"answer from seed {s}" for s in range(4)]
    assert isinstance(result.rounds[0], tuple) and isinstance(result.rounds[1][0].references, tuple)
    assert result.problem_id == "p1"
    assert not [r for r in caplog.records if "unregistered type" in r.getMessage()]
    assert not [r for r in caplog.records if "Blocked deserialization" in r.getMessage()]


async def test_state_reads_back_as_records_with_in_memory_saver(
    caplog: pytest.LogCaptureFixture,
) -> None:
    graph = build_pacore_graph(SeedClient(), config=CONFIG, checkpointer=InMemorySaver())
    thread = {"configurable": {"thread_id": "t"}}
    with caplog.at_level(logging.WARNING):
        await graph.ainvoke({"messages": [HumanMessage("Q?")]}, thread)
        state = (await graph.aget_state(thread)).values
        history = [s async for s in graph.aget_state_history(thread)]
    assert isinstance(state["result"], PaCoReResult)
    assert isinstance(state["messages"][-1], AIMessage)
    assert len(history) > 5
    assert not [r for r in caplog.records if "unregistered type" in r.getMessage()]


async def test_nested_in_a_checkpointed_parent_graph() -> None:
    pacore = build_pacore_graph(SeedClient(), config=CONFIG)

    class Chat(MessagesState):
        pass

    parent = StateGraph(Chat)
    parent.add_node("pacore", pacore)
    parent.add_edge(START, "pacore")
    app = parent.compile(checkpointer=InMemorySaver(serde=pacore_serde()))
    thread = {"configurable": {"thread_id": "chat"}}
    out = await app.ainvoke({"messages": [HumanMessage("Q?")]}, thread)
    assert out["messages"][-1].content == "answer from seed 2000"
    snapshot = await app.aget_state(thread, subgraphs=True)
    assert snapshot.values["messages"][-1].content == "answer from seed 2000"


def test_resume_works_under_strict_msgpack() -> None:
    """LANGGRAPH_STRICT_MSGPACK=true refuses unregistered types: the resume must still work."""
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true", "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{__file__}::test_resume_calls_only_the_explorers_whose_results_were_not_saved",
            f"{__file__}::test_state_reads_back_as_records_with_in_memory_saver",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT / "tests",
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "3 passed" in proc.stdout


async def test_bad_checkpoint_specs_fail_with_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="use none, memory, a postgresql"):
        async with open_checkpointer("redis://x", tmp_path / "a.sqlite"):
            pass
    async with open_checkpointer("none", tmp_path / "a.sqlite") as saver:
        assert saver is None
    async with open_checkpointer(None, tmp_path / "sub" / "a.sqlite") as saver:
        assert saver is not None
    assert (tmp_path / "sub" / "a.sqlite").exists()


async def test_an_unreachable_postgresql_is_refused_at_once(tmp_path: Path) -> None:
    """Issue 31 (low): a closed port failed after 61 s (the whole --checkpoint-timeout)."""
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://pacore:secret@127.0.0.1:{port}/runs"
    started = time.monotonic()
    with pytest.raises(ValueError) as info:
        async with asyncio.timeout(30), open_checkpointer(url, tmp_path / "a.sqlite"):
            pass
    elapsed = time.monotonic() - started
    message = str(info.value)
    assert elapsed < 5, f"{elapsed:.1f} s"
    assert message.startswith(f"--checkpoint postgresql://pacore:***@127.0.0.1:{port}/runs: ")
    assert "refused" in message and "secret" not in message and "\n" not in message


# ----------------------------------------------------------------- only changed channels


def _rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    import sqlite3

    with sqlite3.connect(path) as conn:
        return list(conn.execute(sql))


async def test_a_step_encodes_only_the_channels_it_changed(tmp_path: Path) -> None:
    """Each trajectory is stored once per version of a channel holding it, not once per step.

    Before, every checkpoint re-encoded the whole state: round 0's answers
    were in each of the run's later checkpoints.
    """
    path = tmp_path / "ck.sqlite"
    async with open_checkpointer(f"sqlite:///{path}", tmp_path / "unused.sqlite") as saver:
        graph = build_pacore_graph(SeedClient(), config=CONFIG, checkpointer=saver)
        cfg: Any = {"configurable": {"thread_id": "t"}}
        out = await graph.ainvoke({"messages": [HumanMessage("Q?")]}, cfg)
        again = (await graph.aget_state(cfg)).values  # read back from the blobs
    first = out["result"].rounds[0][0].message
    assert again["result"] == out["result"] and again["messages"] == out["messages"]
    assert len(again["rounds"]) == 3
    checkpoints = _rows(path, "SELECT checkpoint FROM checkpoints")
    blobs = _rows(path, "SELECT channel, blob FROM pacore_blobs")
    assert len(checkpoints) >= 8  # one per step
    needle = first.encode()
    assert not any(needle in row[0] for row in checkpoints)  # values live in the blobs
    holding = sorted(channel for channel, blob in blobs if blob and needle in blob)
    # Where it changed: round 0's fan-in (pending), round 1's prompt (its plan) and its
    # Send, round 0 in ``rounds`` (once: later versions of ``rounds`` refer to it), the
    # result; not in each later checkpoint too.
    assert holding == ["__pregel_tasks", "pending", "plan", "result", "rounds/0"]


async def test_a_thread_written_whole_resumes_and_stays_whole(tmp_path: Path) -> None:
    """A checkpoint from before (LangGraph's own SQLite saver) resumes with the values it had."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from pacore_graph.runs.checkpoint import with_pacore_types

    path = tmp_path / "ck.sqlite"
    cfg: Any = {"configurable": {"thread_id": "old"}}
    question = {"messages": [{"role": "user", "content": "Q?"}]}
    async with AsyncSqliteSaver.from_conn_string(str(path)) as plain:
        graph = build_pacore_graph(
            SeedClient(hold=frozenset({2})), config=CONFIG, checkpointer=with_pacore_types(plain)
        )
        # sync: no checkpoint is still being written in the background when the saver
        # closes (it held the file's lock, and opening it again failed as "locked").
        run = asyncio.create_task(graph.ainvoke(question, cfg, durability="sync"))
        await saved_tasks(graph, cfg, want=3)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        # The cancel can stop LangGraph's saver between a write and its commit, leaving
        # that connection's write transaction open (about one run in five here): commit
        # it under the saver's lock, so the file is free for the next opener.
        async with plain.lock:
            await plain.conn.commit()
    written = _rows(path, "SELECT checkpoint FROM checkpoints")
    assert written and not any(b"pacore_blobs" in row[0] for row in written)

    resumed = SeedClient()
    async with open_checkpointer(f"sqlite:///{path}", tmp_path / "unused.sqlite") as saver:
        graph = build_pacore_graph(resumed, config=CONFIG, checkpointer=saver)
        out = await graph.ainvoke(None, cfg)
        again = (await graph.aget_state(cfg)).values
    assert resumed.seeds == [2, 1000, 1001, 2000]  # only the unsaved explorer, then the rest
    assert [len(r) for r in out["result"].rounds] == [4, 2, 1]
    assert again["result"] == out["result"] and len(again["rounds"]) == 3
    assert _rows(path, "SELECT COUNT(*) FROM pacore_blobs") == [(0,)]  # it stayed whole


async def test_only_the_checkpoints_before_model_calls_are_written(tmp_path: Path) -> None:
    """With ``checkpoint_before={"explore"}``: one checkpoint per round, and a resume still
    asks only the explorer whose answer was not saved (the cheap steps run again)."""
    path = tmp_path / "ck.sqlite"
    cfg: Any = {"configurable": {"thread_id": "sparse"}}
    question = {"messages": [{"role": "user", "content": "Q?"}]}
    async with open_checkpointer(f"sqlite:///{path}", tmp_path / "unused.sqlite") as saver:
        saver.checkpoint_before = frozenset({"explore"})
        full = build_pacore_graph(SeedClient(), config=CONFIG, checkpointer=saver)
        await full.ainvoke(question, {"configurable": {"thread_id": "whole-run"}})
        kept = _rows(path, "SELECT COUNT(*) FROM checkpoints WHERE thread_id = 'whole-run'")
        assert kept == [(3,)]  # before each of the 3 rounds' explorers, not all 12 steps

        graph = build_pacore_graph(
            SeedClient(hold=frozenset({2})), config=CONFIG, checkpointer=saver
        )
        run = asyncio.create_task(graph.ainvoke(question, cfg))
        await saved_tasks(graph, cfg, want=3)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        resumed = SeedClient()
        out = await build_pacore_graph(resumed, config=CONFIG, checkpointer=saver).ainvoke(
            None, cfg
        )
    assert resumed.seeds == [2, 1000, 1001, 2000]
    assert [len(r) for r in out["result"].rounds] == [4, 2, 1]


# ----------------------------------------------------------------- rounds by reference

#: How a Trajectory's type name starts in msgpack (a 10-character str): one per record encoded.
_TRAJECTORY = b"\xaaTrajectory"
QUESTION = {"messages": [{"role": "user", "content": "Q?"}]}


def _rounds_rows(path: Path, thread: str) -> list[tuple[str, str, bytes]]:
    """The thread's ``pacore_blobs`` rows of ``rounds`` and of its items (``rounds/<i>``)."""
    import sqlite3

    with sqlite3.connect(path) as conn:
        return list(
            conn.execute(
                "SELECT channel, type, blob FROM pacore_blobs WHERE thread_id = ? AND "
                "(channel = 'rounds' OR channel LIKE 'rounds/%') ORDER BY version, channel",
                (thread,),
            )
        )


def _shape(rounds: Any) -> list[list[tuple[Any, ...]]]:
    """What a run's rounds said (not their latencies, which differ between runs)."""
    return [[(t.round, t.index, t.content, t.message, t.references) for t in r] for r in rounds]


def _exact_tuples(rounds: Any) -> bool:
    return type(rounds) is tuple and all(type(r) is tuple for r in rounds)


@pytest.mark.parametrize("sparse", [False, True], ids=["every-step", "before-model-calls"])
async def test_each_rounds_trajectories_are_encoded_once(tmp_path: Path, sparse: bool) -> None:
    """``rounds`` goes by reference: each round's trajectories are one row, written once.

    Before, every new version of ``rounds`` re-encoded all earlier rounds: at
    [4, 2] (+ the final 1) 4 + 6 + 7 = 17 trajectories for the 7 the run made,
    and at ``high`` round 0's 32 three times.
    """
    path = tmp_path / "ck.sqlite"
    cfg: Any = {"configurable": {"thread_id": "t"}}
    async with open_checkpointer(f"sqlite:///{path}", tmp_path / "unused.sqlite") as saver:
        if sparse:
            saver.checkpoint_before = frozenset({"explore"})
        graph = build_pacore_graph(SeedClient(), config=CONFIG, checkpointer=saver)
        out = await graph.ainvoke(QUESTION, cfg)
        again = (await graph.aget_state(cfg)).values
    # The sparse run's last checkpoint is the one before the final round's explorer.
    widths = [4, 2] if sparse else [4, 2, 1]
    rows = _rounds_rows(path, "t")
    items = [(channel, blob) for channel, _, blob in rows if channel != "rounds"]
    assert [channel for channel, _ in items] == [f"rounds/{i}" for i in range(len(widths))]
    assert [blob.count(_TRAJECTORY) for _, blob in items] == widths  # each once, in its row
    refs = [(type_, blob) for channel, type_, blob in rows if channel == "rounds"]
    assert len(refs) == len(widths) + 1  # (), then one per round added
    assert all(type_ == "pacore_refs" and len(blob) < 300 for type_, blob in refs)
    assert sum(blob.count(_TRAJECTORY) for _, _, blob in rows) == sum(widths)
    # Read back exactly: the same records, as tuples of tuples.
    assert again["rounds"] == out["result"].rounds[: len(widths)]
    assert _exact_tuples(again["rounds"])


async def _until_round_1_has_a_saved_answer(graph: Any, config: Any) -> None:
    for _ in range(500):
        snapshot = await graph.aget_state(config)
        if snapshot.values.get("round") == 1 and any(t.result for t in snapshot.tasks):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("round 1's first answer was never saved")


@pytest.mark.parametrize("sparse", [False, True], ids=["every-step", "before-model-calls"])
async def test_a_run_stopped_in_round_1_resumes_from_its_referenced_rounds(
    tmp_path: Path, sparse: bool
) -> None:
    """Stopped after round 0 was stored by reference: a new saver on the file rebuilds it,
    asks only the unsaved explorer and the rounds after, and does not write round 0 again."""
    path = tmp_path / "ck.sqlite"
    cfg: Any = {"configurable": {"thread_id": "r"}}
    reference = await build_pacore_graph(SeedClient(), config=CONFIG).ainvoke(QUESTION)

    async with open_checkpointer(f"sqlite:///{path}", tmp_path / "unused.sqlite") as saver:
        if sparse:
            saver.checkpoint_before = frozenset({"explore"})
        first = SeedClient(hold=frozenset({1001}))
        graph = build_pacore_graph(first, config=CONFIG, checkpointer=saver)
        run = asyncio.create_task(graph.ainvoke(QUESTION, cfg))
        await _until_round_1_has_a_saved_answer(graph, cfg)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    assert len(first.seeds) == 6 and set(first.seeds) == {0, 1, 2, 3, 1000, 1001}

    second = SeedClient()  # a new process's saver: nothing remembered but the file
    async with open_checkpointer(f"sqlite:///{path}", tmp_path / "unused.sqlite") as saver:
        if sparse:
            saver.checkpoint_before = frozenset({"explore"})
        graph = build_pacore_graph(second, config=CONFIG, checkpointer=saver)
        out = await graph.ainvoke(None, cfg)
        again = (await graph.aget_state(cfg)).values
    assert second.seeds == [1001, 2000]  # no finished sample asked again
    assert _shape(out["result"].rounds) == _shape(reference["result"].rounds)
    assert out["result"].answer == reference["result"].answer
    assert _exact_tuples(again["rounds"]) and _exact_tuples(out["result"].rounds)
    items = [channel for channel, _, _ in _rounds_rows(path, "r") if channel != "rounds"]
    assert items == ["rounds/0", "rounds/1"] + ([] if sparse else ["rounds/2"])  # each once


async def test_a_new_question_on_the_same_thread_writes_its_rounds_afresh(
    tmp_path: Path,
) -> None:
    """A finished thread asked again: prepare resets ``rounds`` to (); the new rounds are
    written (not the old ones referred to) and read back as the new run's."""
    path = tmp_path / "ck.sqlite"
    cfg: Any = {"configurable": {"thread_id": "again"}}
    async with open_checkpointer(f"sqlite:///{path}", tmp_path / "unused.sqlite") as saver:
        graph = build_pacore_graph(SeedClient(), config=CONFIG, checkpointer=saver)
        await graph.ainvoke(QUESTION, cfg)
        graph = build_pacore_graph(SeedClient(says="other"), config=CONFIG, checkpointer=saver)
        out = await graph.ainvoke({"messages": [{"role": "user", "content": "Q2?"}]}, cfg)
    assert [t.content for t in out["result"].rounds[0]] == [
        f"other from seed {s}" for s in range(4)
    ]
    async with open_checkpointer(f"sqlite:///{path}", tmp_path / "unused.sqlite") as saver:
        graph = build_pacore_graph(SeedClient(), config=CONFIG, checkpointer=saver)
        again = (await graph.aget_state(cfg)).values
    assert again["rounds"] == out["result"].rounds and _exact_tuples(again["rounds"])
    items = [channel for channel, _, _ in _rounds_rows(path, "again") if channel != "rounds"]
    assert items == ["rounds/0", "rounds/1", "rounds/2"] * 2  # once per run


def _trajectory(content: str) -> Trajectory:
    return Trajectory(round=0, index=0, content=content, references=(1, 2))


async def test_rounds_that_do_not_extend_the_last_written_start_over(tmp_path: Path) -> None:
    """The saver reuses references only while ``rounds`` extends what it wrote last: a value
    with another start, or a shorter one, is written whole again, and each reads back."""
    from langgraph.checkpoint.base import empty_checkpoint

    path = tmp_path / "ck.sqlite"
    a, b, c = ((_trajectory(x),) for x in "abc")
    steps: list[Any] = [(a,), (a, b), (c, b), (c,), (c, a), [list(c)]]
    config: Any = {"configurable": {"thread_id": "s", "checkpoint_ns": ""}}
    read: list[Any] = []
    async with open_checkpointer(f"sqlite:///{path}", tmp_path / "unused.sqlite") as saver:
        version = None
        for value in steps:
            version = saver.get_next_version(version, None)
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"rounds": value}
            checkpoint["channel_versions"] = {"rounds": version}
            config = await saver.aput(config, checkpoint, {}, {"rounds": version})
            read.append((await saver.aget_tuple(config)).checkpoint["channel_values"]["rounds"])
    rows = _rounds_rows(path, "s")
    written = [
        (channel, blob.count(_TRAJECTORY)) for channel, _, blob in rows if channel != "rounds"
    ]
    assert written == [
        ("rounds/0", 1),  # (a,)
        ("rounds/1", 1),  # (a, b): only b
        ("rounds/0", 1), ("rounds/1", 1),  # (c, b): another start, both again
        ("rounds/0", 1),  # (c,): shorter, again
        ("rounds/1", 1),  # (c, a): extends (c,), only a
    ]  # fmt: skip
    types = [type_ for channel, type_, _ in rows if channel == "rounds"]
    # A list is not a tuple of tuples: written whole, as before.
    assert types == ["pacore_refs"] * 5 + ["msgpack"]
    assert read[:5] == steps[:5] and all(_exact_tuples(value) for value in read[:5])
    assert read[5] == [list(c)]


async def test_a_thread_whose_rounds_were_written_as_values_resumes(tmp_path: Path) -> None:
    """A file from before references (``rounds`` one plain row per version) still resumes:
    those rows read as they were, and the run finishes with the answers it would have."""
    path = tmp_path / "ck.sqlite"
    cfg: Any = {"configurable": {"thread_id": "before"}}
    async with open_checkpointer(f"sqlite:///{path}", tmp_path / "unused.sqlite") as saver:
        saver.append_only = frozenset()  # writes ``rounds`` as the saver did before
        graph = build_pacore_graph(
            SeedClient(hold=frozenset({1001})), config=CONFIG, checkpointer=saver
        )
        run = asyncio.create_task(graph.ainvoke(QUESTION, cfg))
        await _until_round_1_has_a_saved_answer(graph, cfg)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    assert {type_ for channel, type_, _ in _rounds_rows(path, "before")} == {"msgpack"}

    resumed = SeedClient()
    async with open_checkpointer(f"sqlite:///{path}", tmp_path / "unused.sqlite") as saver:
        graph = build_pacore_graph(resumed, config=CONFIG, checkpointer=saver)
        out = await graph.ainvoke(None, cfg)
        again = (await graph.aget_state(cfg)).values
    assert resumed.seeds == [1001, 2000]
    assert [t.content for t in out["result"].rounds[0]] == [
        f"answer from seed {s}" for s in range(4)
    ]
    assert [len(r) for r in out["result"].rounds] == [4, 2, 1]
    assert again["result"] == out["result"] and len(again["rounds"]) == 3
