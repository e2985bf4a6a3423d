"""The SQLite store on its own: its documented layout, group commits, the journal, old files.

Why these tests: :class:`GroupCommitSqliteSaver` used to be built inside a
function of ``runs/checkpoint.py``; it is now a class a reader can find, with
its file layout written in its module docstring. These tests open it
directly (no graph, no ``open_checkpointer``) and hold the docstring to the
file it writes, so the two cannot drift apart.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from pacore_graph.runs import sqlite_store
from pacore_graph.runs.sqlite_store import GroupCommitSqliteSaver
from pacore_graph.runs.store_guard import StoreGuard
from pacore_graph.values.records import Trajectory


@asynccontextmanager
async def store(path: Path) -> AsyncIterator[GroupCommitSqliteSaver]:
    """The store on ``path`` as its opener sets it up: reads on aiosqlite, writes on ``writer``."""
    async with aiosqlite.connect(str(path)) as conn:
        saver = GroupCommitSqliteSaver(conn)
        saver.guard = StoreGuard(str(path), fatal=(sqlite3.Error, OSError))
        await saver.setup()
        saver.writer = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        try:
            yield saver
        finally:
            saver.writer.close()


def _config(thread: str, checkpoint_id: str | None = None) -> Any:
    conf = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _documented_tables() -> dict[str, tuple[list[str], list[str]]]:
    """Table -> (key columns, other columns), read from the module docstring's layout block."""
    doc = sqlite_store.__doc__ or ""
    block = doc.split("namespace (``''`` at the top level)::", 1)[1].split("\n- ", 1)[0]
    entries = re.findall(r"(\w+)\s+\(([^)]*)\)\s*->\s*([^\n]*(?:\n\s{18,}[^\n]*)?)", block)
    tables: dict[str, tuple[list[str], list[str]]] = {}
    for name, keys, rest in entries:
        values = re.sub(r"\s+(LangGraph's)?\s*$", "", " ".join(rest.split()))
        tables[name] = (
            [k.strip() for k in keys.split(",")],
            [v.strip() for v in values.replace("LangGraph's", "").split(",") if v.strip()],
        )
    return tables


async def test_the_file_has_the_tables_its_docstring_describes(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    async with store(path):
        pass
    documented = _documented_tables()
    assert set(documented) == {"checkpoints", "writes", "pacore_blobs", "pacore_journal"}
    with sqlite3.connect(path) as db:
        found = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert found == set(documented)
        for table, (keys, values) in documented.items():
            columns = db.execute(f"PRAGMA table_info({table})").fetchall()
            primary = [c[1] for c in sorted((c for c in columns if c[5]), key=lambda c: c[5])]
            assert primary == keys, table
            assert sorted(c[1] for c in columns if not c[5]) == sorted(values), table


async def test_writes_issued_together_share_one_commit_and_are_committed_on_return(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.sqlite"
    async with store(path) as saver:
        statements: list[str] = []
        saver.writer.set_trace_callback(statements.append)
        config = _config("t", "c1")
        await asyncio.gather(
            *(
                saver.aput_writes(config, [("channel", {"i": i})], task_id=f"task-{i}")
                for i in range(5)
            )
        )
        assert statements.count("COMMIT") == 1  # five callers, one transaction
        # Committed when the callers returned: another connection sees every row.
        with sqlite3.connect(path) as other:
            assert other.execute("SELECT COUNT(*) FROM writes").fetchone()[0] == 5
        await saver.aput_writes(config, [("channel", {"i": 5})], task_id="task-5")
        assert statements.count("COMMIT") == 2  # a later turn: its own commit


async def test_a_failed_commit_fails_every_caller_of_its_batch(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    async with store(path) as saver:
        saver.writer.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON writes "
            "WHEN NEW.task_id = 'bad' BEGIN SELECT RAISE(ABORT, 'refused'); END"
        )
        config = _config("t", "c1")
        outcomes = await asyncio.gather(
            saver.aput_writes(config, [("channel", 1)], task_id="good"),
            saver.aput_writes(config, [("channel", 2)], task_id="bad"),
            return_exceptions=True,
        )
        assert [type(o) for o in outcomes] == [sqlite3.IntegrityError] * 2
        assert saver.writer.execute("SELECT COUNT(*) FROM writes").fetchone()[0] == 0  # rolled back


async def test_a_checkpoint_is_stored_as_its_changed_channels_and_reads_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.sqlite"
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"question": "Q?", "rounds": (("a", "b"), ("c",))}
    checkpoint["channel_versions"] = {"question": "1", "rounds": "1"}
    async with store(path) as saver:
        await saver.aput(_config("t"), checkpoint, {}, {"question": "1", "rounds": "1"})
        with sqlite3.connect(path) as db:
            rows = db.execute("SELECT channel, version, type FROM pacore_blobs ORDER BY channel")
            assert [r[:2] for r in rows] == [
                ("question", "1"),
                ("rounds", "1"),
                ("rounds/0", "1"),
                ("rounds/1", "1"),
            ]
            refs = db.execute("SELECT type FROM pacore_blobs WHERE channel = 'rounds'").fetchone()
            assert refs == ("pacore_refs",)
    async with store(path) as reopened:  # another process: nothing remembered but the file
        found = await reopened.aget_tuple(_config("t"))
    assert found is not None
    assert found.checkpoint["channel_values"] == {
        "question": "Q?",
        "rounds": (("a", "b"), ("c",)),
    }


async def test_a_checkpoint_written_by_langgraphs_own_saver_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"question": "Q?", "answer": 42}
    checkpoint["channel_versions"] = {"question": "1", "answer": "1"}
    async with AsyncSqliteSaver.from_conn_string(str(path)) as plain:
        await plain.aput(_config("t"), checkpoint, {}, {"question": "1", "answer": "1"})
    async with store(path) as saver:
        assert saver.has_checkpoints("t") and not saver.has_checkpoints("other")
        found = await saver.aget_tuple(_config("t"))
        assert found is not None
        assert found.checkpoint["channel_values"] == {"question": "Q?", "answer": 42}
        assert await saver.aget_tuple(_config("other")) is None


async def test_the_journal_round_trips_and_goes_with_its_thread(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    recorded = (
        Trajectory(round=0, index=0, content="4", completion_tokens=3),
        Trajectory(round=0, index=1, error="HTTP 500 from the upstream"),
    )
    async with store(path) as saver:
        # A thread with no journal rows at set-up is not read (none can be there).
        assert await saver.journal_replay("t", "k") is None
        await saver.journal_record("t", "k", recorded)
    async with store(path) as reopened:
        assert await reopened.journal_replay("t", "k") == recorded
        assert await reopened.journal_replay("t", "other key") is None
        await reopened.adelete_thread("t")
        assert await reopened.journal_replay("t", "k") is None
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM pacore_journal").fetchone() == (0,)
