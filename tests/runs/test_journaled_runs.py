"""The explorer journal: durable dataset runs without LangGraph's per-step checkpoints.

``run_jobs(..., model_nodes=PACORE_MODEL_NODES)`` on the SQLite store runs
each problem unchecked and journals each explorer call's results
(:mod:`pacore_graph.graph.journal`). These tests stop a run in one process
(a cancelled fan-out, a caller that cannot write its line) and run it again
on the same file with a new graph and client, which must be asked only for
what was not journaled. The SIGKILLed whole process is
``test_durable_runs.py``'s.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from durable_support import SeedClient, saved_tasks

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.runs.checkpoint import open_checkpointer
from pacore_graph.runs.fanout import Job, run_jobs
from pacore_graph.runs.runner import PACORE_MODEL_NODES
from pacore_graph.runs.store_guard import StoreError
from pacore_graph.values.records import PaCoReResult

#: One call per explorer (no ``n``-batching): a resume can be told apart per sample.
CONFIG = PaCoReConfig(rounds=[4, 2], batch_samples=False, sampling={"seed": 0})
QUESTION = [{"role": "user", "content": "Q?"}]


def _rows(path: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return list(conn.execute(sql, args))


def _job(thread: str = "t") -> Job:
    return Job(thread_id=thread, state={"messages": QUESTION, "problem_id": thread})


class Lines:
    """The caller's side: records each job's outcome; ``fail`` makes writing it fail."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.done: dict[str, PaCoReResult | BaseException] = {}

    async def __call__(self, job: Job, result: PaCoReResult | None, exc: BaseException | None):
        if self.fail:
            raise OSError(28, "No space left on device")
        self.done[job.thread_id] = result if result is not None else exc  # type: ignore[assignment]


async def _run(path: Path, client: Any, lines: Lines, *jobs: Job, config: Any = CONFIG) -> None:
    async with open_checkpointer(f"sqlite:///{path}", path) as saver:
        graph = build_pacore_graph(client, config=config)
        await run_jobs(
            graph,
            list(jobs) or [_job()],
            lines,
            max_in_flight=4,
            checkpointer=saver,
            model_nodes=PACORE_MODEL_NODES,
        )


async def _until_rows(path: Path, want: int) -> None:
    for _ in range(1000):
        try:
            if _rows(path, "SELECT COUNT(*) FROM pacore_journal")[0][0] >= want:
                return
        except sqlite3.OperationalError:  # the store is still being set up
            pass
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {want} journal rows were ever committed")


async def test_a_stopped_run_resumes_asking_only_the_calls_in_flight(tmp_path: Path) -> None:
    """Explorer 2 of round 0 never answers; the run is stopped once the other three are
    journaled. The resume, on a new graph and client, asks only seed 2 and the later rounds,
    and no LangGraph checkpoint was ever written."""
    path = tmp_path / "ck.sqlite"
    first = SeedClient(hold=frozenset({2}))
    run = asyncio.create_task(_run(path, first, Lines()))
    await _until_rows(path, 3)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert sorted(s for s in first.seeds if s is not None) == [0, 1, 2, 3]
    assert _rows(path, "SELECT COUNT(*) FROM checkpoints") == [(0,)]
    assert _rows(path, "SELECT COUNT(*) FROM writes") == [(0,)]

    resumed, lines = SeedClient(), Lines()
    await _run(path, resumed, lines)
    assert resumed.seeds == [2, 1000, 1001, 2000]
    result = lines.done["t"]
    assert isinstance(result, PaCoReResult)
    assert [len(r) for r in result.rounds] == [4, 2, 1]
    # The replayed explorers are the ones the first run got, in their places.
    assert [t.content for t in result.rounds[0]] == [f"answer from seed {i}" for i in range(4)]
    assert _rows(path, "SELECT COUNT(*) FROM pacore_journal") == [(0,)]  # gone with its line


async def test_a_batched_round_is_one_journal_entry(tmp_path: Path) -> None:
    """With ``n``-batching a round's explorers are one call and one row; a resume of a
    finished-but-unwritten run is answered from those rows alone."""
    path = tmp_path / "ck.sqlite"
    batched = CONFIG.model_copy(update={"batch_samples": True})
    first = SeedClient()
    with pytest.raises(OSError, match="No space left"):
        await _run(path, first, Lines(fail=True), config=batched)
    assert first.answered == 3  # one n-request per round
    assert _rows(path, "SELECT COUNT(*) FROM pacore_journal WHERE thread_id = 't'") == [(3,)]
    again, lines = SeedClient(), Lines()
    await _run(path, again, lines, config=batched)
    assert again.seeds == []
    assert isinstance(lines.done["t"], PaCoReResult)


async def test_a_finished_problem_whose_line_was_lost_costs_no_call(tmp_path: Path) -> None:
    path = tmp_path / "ck.sqlite"
    first = SeedClient(says="first")
    with pytest.raises(OSError, match="No space left"):
        await _run(path, first, Lines(fail=True))
    assert first.answered == 7
    again, lines = SeedClient(says="second"), Lines()
    await _run(path, again, lines)
    assert again.seeds == []  # every call answered from the journal
    result = lines.done["t"]
    assert isinstance(result, PaCoReResult)
    assert result.final.content == "first from seed 2000"


class FailingClient(SeedClient):
    """Fails every call of round 1 (seeds 1000+): the problem fails there."""

    async def complete(self, messages: Any, *, n: int = 1, params: Any, seed: Any = None) -> Any:
        if seed is not None and seed >= 1000:
            from pacore_graph.errors import ModelCallError

            self.seeds.append(seed)
            raise ModelCallError("upstream 500")
        return await super().complete(messages, n=n, params=params, seed=seed)


async def test_a_failed_problem_starts_afresh(tmp_path: Path) -> None:
    """Its error line is written and its journal goes with it: the re-run asks every call."""
    path = tmp_path / "ck.sqlite"
    lines = Lines()
    await _run(path, FailingClient(), lines)
    assert isinstance(lines.done["t"], BaseException)
    assert _rows(path, "SELECT COUNT(*) FROM pacore_journal") == [(0,)]
    again, lines = SeedClient(), Lines()
    await _run(path, again, lines)
    assert sorted(s for s in again.seeds if s is not None) == [0, 1, 2, 3, 1000, 1001, 2000]


async def test_a_thread_with_langgraph_checkpoints_resumes_from_them(tmp_path: Path) -> None:
    """A file from before the journal: its thread goes on from its checkpoints, asking only
    the explorer whose result was not saved."""
    path = tmp_path / "ck.sqlite"
    cfg: Any = {"configurable": {"thread_id": "t"}}
    async with open_checkpointer(f"sqlite:///{path}", path) as saver:
        graph = build_pacore_graph(
            SeedClient(hold=frozenset({2})), config=CONFIG, checkpointer=saver
        )
        run = asyncio.create_task(graph.ainvoke({"messages": QUESTION}, cfg))
        await saved_tasks(graph, cfg, want=3)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    assert _rows(path, "SELECT COUNT(*) FROM checkpoints")[0][0] > 0
    # A cancelled task leaves its CancelledError as a write (a failed run: started over);
    # a killed process leaves nothing. Take it out to have the killed run's file.
    _rows(path, "DELETE FROM writes WHERE channel = '__error__'")
    resumed, lines = SeedClient(), Lines()
    await _run(path, resumed, lines)
    assert resumed.seeds == [2, 1000, 1001, 2000]
    assert isinstance(lines.done["t"], PaCoReResult)
    assert _rows(path, "SELECT COUNT(*) FROM checkpoints") == [(0,)]  # deleted once written
    assert _rows(path, "SELECT COUNT(*) FROM pacore_journal") == [(0,)]


async def test_a_journal_that_cannot_be_written_stops_the_run_with_one_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ck.sqlite"
    async with open_checkpointer(f"sqlite:///{path}", path) as saver:
        _rows(
            path,
            "CREATE TRIGGER full BEFORE INSERT ON pacore_journal "
            "BEGIN SELECT RAISE(FAIL, 'database or disk is full'); END",
        )
        lines = Lines()
        with pytest.raises(StoreError) as raised:
            await run_jobs(
                build_pacore_graph(SeedClient(), config=CONFIG),
                [_job()],
                lines,
                max_in_flight=1,
                checkpointer=saver,
                model_nodes=PACORE_MODEL_NODES,
            )
    message = str(raised.value)
    assert str(path) in message and "full" in message and "\n" not in message
    assert lines.done == {}  # no problem is recorded as failed for the store's failure
