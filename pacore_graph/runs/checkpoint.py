"""Checkpointers for the PaCoRe graph: which types it stores, and where.

Which types a checkpoint stores, and the serializer that restores them, live
in the graph layer (:mod:`pacore_graph.graph.checkpoint_types`, whose names
are re-exported here): the graph builder registers them with any saver.

:func:`open_checkpointer` turns the CLI's ``--checkpoint`` value into a
saver: ``none`` (off), ``memory``, a ``postgresql://`` URL (Postgres), or a
SQLite file (``sqlite:///path`` or a plain path). Dataset runs keep theirs
beside their output by default: :data:`RUN_CHECKPOINT_SUFFIX` and
:data:`EVAL_CHECKPOINT_FILE`.

Durability: LangGraph persists each step's checkpoint, and each finished
task's writes ("pending writes"), either before the next step starts
(``"sync"``), in the background while it runs (``"async"``), or only when
the run exits (``"exit"``, which a SIGKILL loses). :data:`DEFAULT_DURABILITY`
is what dataset runs use; ``benchmarks/bench_core.py`` measures the modes.

Failures: a store that cannot be opened (PostgreSQL down at the start, a
SQLite file that is not a database) is a one-line ``ValueError`` naming it;
one that fails during the run raises :class:`~pacore_graph.runs.store_guard.StoreError`
after the bounded outage :mod:`pacore_graph.runs.store_guard` allows.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import ormsgpack

from pacore_graph.graph.checkpoint_types import (
    LEGACY_MODULES,
    SERDE_ALLOWLIST,
    pacore_serde,
    with_pacore_types,
)
from pacore_graph.graph.records import Trajectory
from pacore_graph.runs.filenames import EVAL_CHECKPOINT_FILE, RUN_CHECKPOINT_SUFFIX
from pacore_graph.runs.private_files import FILE_MODE, private_dir
from pacore_graph.runs.store_guard import (
    DEFAULT_STORE_RETRY_S,
    StoreGuard,
    guarded_saver_class,
    redact_store,
)

__all__ = [
    "DEFAULT_DURABILITY",
    "EVAL_CHECKPOINT_FILE",
    "LEGACY_MODULES",
    "RUN_CHECKPOINT_SUFFIX",
    "SERDE_ALLOWLIST",
    "Durability",
    "default_checkpoint_path",
    "open_checkpointer",
    "pacore_serde",
    "with_checkpointer",
    "with_pacore_types",
]

Durability = Literal["sync", "async", "exit"]

#: Dataset runs checkpoint with this durability, chosen from bench_core's figures
#: (200 problems at ``high``, 7,400 samples, SQLite, 2-core machine; wall vs the
#: same graph without checkpoints in the same run). Since a batched round is one
#: ``Send`` (fewer tasks, fewer writes): ``sync`` 1.01x at 0.5 s server latency
#: and 1.6x at 0 s (load 0.8). Before that: ``sync`` 1.04-1.11x and 1.25x,
#: ``async`` 1.18x and 1.21x, ``exit`` 0.91x and 0.86x (but a SIGKILL loses
#: everything). ``sync`` also never leaves a task's writes pointing at a
#: checkpoint that was not saved yet. Before :func:`pacore_serde`'s fast path
#: (LangGraph's msgpack hook runs ~15 type tests per record, one a slow runtime
#: ``Protocol`` check) ``sync`` was 1.48x and 2.15x.
DEFAULT_DURABILITY: Durability = "sync"


_POSTGRES_POOL = 8

#: libpq's ``connect_timeout`` (seconds) for each PostgreSQL connection attempt.
_CONNECT_TIMEOUT_S = 10

#: How long one operation waits for a pooled connection, and the pool keeps
#: reconnecting one lost connection, before the guard asks again.
_POOL_WAIT_S = 5.0


def with_checkpointer(graph: Any, checkpointer: Any) -> Any:
    """A copy of a compiled graph that checkpoints to ``checkpointer`` (types registered)."""
    return graph.copy(update={"checkpointer": with_pacore_types(checkpointer)})


def default_checkpoint_path(output: Path, *, eval_dir: bool = False) -> Path:
    """Where a dataset run keeps its checkpoints unless ``--checkpoint`` says otherwise."""
    if eval_dir:
        return output / EVAL_CHECKPOINT_FILE
    return output.with_name(output.name + RUN_CHECKPOINT_SUFFIX)


@asynccontextmanager
async def open_checkpointer(
    spec: str | None, default: Path, *, retry_s: float = DEFAULT_STORE_RETRY_S
) -> AsyncIterator[Any]:
    """The saver ``--checkpoint SPEC`` names, open for the block (``None`` when off).

    ``spec`` None means the SQLite file ``default``. Raises ``ValueError``
    with a one-line reason for a spec it cannot use (naming the store, never
    its password). During the block a PostgreSQL store that stops answering
    is waited for ``retry_s`` seconds, then its operations raise
    :class:`~pacore_graph.runs.store_guard.StoreError`; a SQLite store raises it at
    its first failure (a full disk, a corrupt page: waiting would not help).
    """
    if spec is not None and spec.strip().lower() in ("none", "off", ""):
        yield None
        return
    if spec is not None and spec.strip().lower() == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        yield with_pacore_types(InMemorySaver())
        return
    if spec is not None and spec.startswith(("postgresql://", "postgres://")):
        try:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        except ImportError:
            raise ValueError(
                "--checkpoint postgresql://... needs langgraph-checkpoint-postgres "
                "(pip install 'pacore-graph[postgres]')"
            ) from None
        async with _postgres(AsyncPostgresSaver, spec, retry_s) as saver:
            yield with_pacore_types(saver)
        return
    if spec is not None and "://" in spec and not spec.startswith("sqlite:///"):
        raise ValueError(
            f"--checkpoint {spec!r}: use none, memory, a postgresql:// URL, "
            "or a SQLite file (sqlite:///path or a path)"
        )
    path = Path(
        spec[len("sqlite:///") :] if spec and spec.startswith("sqlite:///") else spec or default
    )
    try:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    except ImportError:
        raise ValueError(
            "checkpoints need langgraph-checkpoint-sqlite "
            "(pip install langgraph-checkpoint-sqlite), or pass --checkpoint none"
        ) from None
    async with _sqlite(AsyncSqliteSaver, path) as saver:
        yield with_pacore_types(saver)


@asynccontextmanager
async def _sqlite(saver_cls: Any, path: Path) -> AsyncIterator[Any]:
    """The group-commit SQLite saver on ``path``; ``ValueError`` naming the file if unusable.

    A file that is not a database (or is corrupt where the set-up reads), or
    that cannot be created, is refused here, before any model call.
    """
    import aiosqlite

    guard = StoreGuard(str(path), fatal=(sqlite3.Error, OSError))
    writer: sqlite3.Connection | None = None
    async with contextlib.AsyncExitStack() as stack:
        try:
            private_dir(path.parent)
            # Made 0600 before SQLite opens it: its -wal and -shm files take its mode.
            os.close(os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, FILE_MODE))
            conn = await stack.enter_async_context(aiosqlite.connect(str(path)))
            # WAL with synchronous=NORMAL: a commit survives the process being
            # killed (SIGKILL), only not a power cut, and skips the fsync per
            # commit that made the saver fall behind a fast run (measured: a
            # backlog of unsaved explorer results at the kill, redone on resume).
            await conn.execute("PRAGMA journal_mode=WAL")
            await conn.execute("PRAGMA synchronous=NORMAL")
            async with conn.execute("PRAGMA quick_check") as cursor:
                verdict = await cursor.fetchone()
            if verdict is None or verdict[0] != "ok":
                raise sqlite3.DatabaseError(
                    f"integrity check: {verdict[0] if verdict else 'no answer'}"
                )
            saver = guarded_saver_class(_group_commit_saver(saver_cls))(conn)
            saver.guard = guard
            await saver.setup()
            writer = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
            writer.execute("PRAGMA synchronous=NORMAL")
            writer.execute("PRAGMA busy_timeout=10000")
        except (sqlite3.Error, OSError) as exc:
            if writer is not None:
                writer.close()
            if isinstance(exc, (sqlite3.OperationalError, OSError)):
                # Cannot open, read or write it (a full disk, permissions): not its content.
                raise ValueError(
                    f"--checkpoint {path}: cannot open the SQLite checkpoint file "
                    f"({_first_line(exc)}); pass --checkpoint none to run without checkpoints"
                ) from None
            raise ValueError(
                f"--checkpoint {path}: not a usable SQLite checkpoint file ({_first_line(exc)}); "
                "move it away to start its checkpoints afresh, or pass --checkpoint none"
            ) from None
        assert writer is not None
        saver.writer = writer
        try:
            yield saver
        finally:
            writer.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0].strip() if text else "") or type(exc).__name__


@asynccontextmanager
async def _postgres(saver_cls: Any, url: str, retry_s: float) -> AsyncIterator[Any]:
    """An ``AsyncPostgresSaver`` on a small pool of ``url`` connections, tables set up.

    A pool, not LangGraph's one-connection default: every finished explorer's
    writes are one round trip, and on one shared connection they queued up
    behind each other, so a killed run had lost most of what had come back
    (measured: 88-96 of 96 samples redone). ``synchronous_commit=off`` skips
    the server's WAL flush per commit; the client being killed cannot lose a
    committed write that way, only a crash of the database server could.
    Raises ``ValueError`` (one line, the URL without its password) at once
    when a first connection fails (within ``_CONNECT_TIMEOUT_S``), or when the
    server cannot be used within ``retry_s`` seconds. During the run, a lost
    server is waited for ``retry_s`` seconds (:class:`StoreGuard`), each
    connection attempt bounded by ``_CONNECT_TIMEOUT_S``.
    """
    import psycopg
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    # One direct attempt first (bounded by the connect timeout): a server that is
    # not there is refused at once, not after the pool has retried for retry_s
    # (a closed port took 61 s).
    reason = await _connect_error(url)
    if reason is not None:
        raise ValueError(
            f"--checkpoint {redact_store(url)}: cannot use PostgreSQL ({reason}); "
            "start it, or pass --checkpoint none to run without checkpoints"
        )
    pool = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=_POSTGRES_POOL,
        open=False,
        # Short waits, retried by the guard: each retry asks the pool again, and
        # an empty pool then opens a fresh connection at once. The pool's own
        # reconnection backs off 1, 2, 4 ... 32 s, so with a long
        # reconnect_timeout a server back after 40 s was not tried again
        # until 63 s (measured: the run failed at its 60 s deadline).
        timeout=_POOL_WAIT_S,
        reconnect_timeout=_POOL_WAIT_S,
        kwargs={
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            "options": "-c synchronous_commit=off",
            "connect_timeout": _CONNECT_TIMEOUT_S,
        },
    )
    try:
        await pool.open(wait=True, timeout=max(retry_s, 1.0))
        saver = guarded_saver_class(saver_cls)(conn=pool)
        saver.guard = StoreGuard(
            url,
            retry_s=retry_s,
            transient=(psycopg.OperationalError, OSError),
            fatal=(psycopg.Error,),
            attempt_timeout=True,
            probe=lambda: _connect_error(url),
        )
        await saver.setup()
    except (psycopg.Error, TimeoutError, OSError) as exc:
        await pool.close()
        raise ValueError(
            f"--checkpoint {redact_store(url)}: cannot use PostgreSQL ({_first_line(exc)}); "
            "start it, or pass --checkpoint none to run without checkpoints"
        ) from None
    try:
        yield saver
    finally:
        await pool.close()


async def _connect_error(url: str) -> str | None:
    """Why a fresh connection to ``url`` fails (first line), or None when it works."""
    import psycopg

    try:
        conn = await psycopg.AsyncConnection.connect(url, connect_timeout=_CONNECT_TIMEOUT_S)
    except (psycopg.Error, OSError) as exc:
        return _first_line(exc)
    await conn.close()
    return None


#: LangGraph's channel of pending ``Send`` packets, and the prefix of a node's trigger channel.
_SENDS = "__pregel_tasks"
_BRANCH = "branch:to:"

#: The marker of a checkpoint row whose channel values are rows of ``pacore_blobs``.
_BLOBS = "pacore_blobs"

_BLOBS_TABLE = (
    "CREATE TABLE IF NOT EXISTS pacore_blobs (thread_id TEXT NOT NULL, "
    "checkpoint_ns TEXT NOT NULL DEFAULT '', channel TEXT NOT NULL, version TEXT NOT NULL, "
    "type TEXT NOT NULL, blob BLOB, PRIMARY KEY (thread_id, checkpoint_ns, channel, version))"
)

_PUT_BLOB = (
    "INSERT OR REPLACE INTO pacore_blobs (thread_id, checkpoint_ns, channel, version, type, blob) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)

_GET_BLOB = (
    "SELECT type, blob FROM pacore_blobs WHERE thread_id = ? AND "
    "checkpoint_ns = ? AND channel = ? AND version = ?"
)

#: The explorer journal (:mod:`pacore_graph.graph.journal`): one row per explorer
#: call of a journaled run, its trajectories encoded as one list.
_JOURNAL_TABLE = (
    "CREATE TABLE IF NOT EXISTS pacore_journal (thread_id TEXT NOT NULL, key TEXT NOT NULL, "
    "type TEXT NOT NULL, blob BLOB, PRIMARY KEY (thread_id, key))"
)

_PUT_JOURNAL = (
    "INSERT OR REPLACE INTO pacore_journal (thread_id, key, type, blob) VALUES (?, ?, ?, ?)"
)

_GET_JOURNAL = "SELECT type, blob FROM pacore_journal WHERE thread_id = ? AND key = ?"

#: The type of a journal row written as a msgpack list of trajectory maps.
_TRAJECTORIES = "pacore_trajectories"

#: The type of a ``pacore_blobs`` row holding an append-only channel's value by
#: reference: a JSON list of ``[channel/i, version]``, one per item, each item
#: its own row (see :func:`_group_commit_saver`).
_REFS = "pacore_refs"

#: How many threads' references the saver remembers (the least recently written
#: is forgotten first). Dataset runs delete each problem's thread when its line is
#: written, so this only bounds a caller that keeps its threads: a forgotten
#: thread's next write encodes its items once more, which is still correct.
_REFS_KEPT = 4096

#: What the saver remembers of one append-only channel: the value it last wrote
#: and the references to its items.
_Written = tuple[tuple[Any, ...], list[list[str]]]


def _is_tuple_of_tuples(value: Any) -> bool:
    """Whether ``value`` can go by reference and be rebuilt exactly (a tuple of tuples).

    msgpack reads a tuple back as a list; only a value known to be all tuples
    is rebuilt as tuples, so anything else is written whole, as it reads today.
    """
    return type(value) is tuple and all(type(item) is tuple for item in value)


def _group_commit_saver(base: type) -> type:
    """``AsyncSqliteSaver`` whose writes that arrive together share one transaction.

    A PaCoRe run finishes thousands of explorer tasks, and LangGraph saves each
    one's writes as it finishes: one INSERT and one COMMIT each, every one a
    hop to aiosqlite's thread. Here the rows of every ``aput`` / ``aput_writes``
    issued in the same turn of the event loop go in one ``executemany`` and one
    COMMIT; each caller still returns only once its rows are committed, so
    what LangGraph believes saved is saved. Writes go through a plain
    ``sqlite3`` connection on the event loop's thread (``writer``), reads
    through aiosqlite (``benchmarks/bench_core.py``, ``graph-ckpt-*``,
    measures what this saves).

    Only the channels a step changed are encoded (issue 22): LangGraph
    passes them to ``aput`` as ``new_versions``, and the SQLite saver
    re-encoded the whole state at every step (the conversation, every
    finished round's trajectories) although a step changes one or two
    channels. Here each changed channel's value is one row of
    ``pacore_blobs`` keyed by its version (as LangGraph's PostgreSQL saver
    does), the checkpoint row holds the versions and the marker
    :data:`_BLOBS`, and a read puts the values back. A thread whose
    checkpoints were written whole (before this, or by LangGraph's own
    saver) is read as it was and goes on being written whole: its unchanged
    channels have no rows (``benchmarks/bench_durable.py`` measures it).

    Append-only channels by reference (issue 22): ``rounds`` (a tuple of
    rounds, each a tuple of trajectories) is reset to ``()`` by prepare and
    only ever extended by compaction, yet each change re-encoded every
    earlier round (at ``high``, round 0's 32 trajectories up to two more times).
    For a channel named in ``append_only`` each item is its own row
    (channel ``rounds/<i>``, version: the channel's version when the item was
    first written), encoded once; the channel's row is a :data:`_REFS` list
    of those references, and a read rebuilds the tuple of tuples. The saver
    remembers per thread and namespace the value it last wrote and its
    references (from the checkpoint read when a thread resumes), reuses
    them while the new value extends that one (items compared by identity,
    then equality), and starts over when it does not (a reset by prepare,
    a fork). A legacy whole thread stays whole; a row written as a plain
    value before this still reads. The PostgreSQL store is LangGraph's own
    saver (:func:`_postgres`), untouched: it writes each changed channel's
    whole value.

    Fewer checkpoints: with ``checkpoint_before`` set (the nodes that call a
    model; ``pacore run --input`` sets ``{"explore"}``), a top-level
    checkpoint is written only when a ``Send`` or one of those nodes runs
    next, and the writes of the steps after a skipped one are dropped. A
    resume starts from the last checkpoint kept, re-applies the saved
    explorer results and runs the cheap steps (prepare, round, compact,
    finalize: no model calls) again, so no finished sample is asked again.
    """
    import asyncio
    import itertools
    import json

    from langgraph.checkpoint.base import WRITES_IDX_MAP, get_checkpoint_metadata

    class GroupCommitSqliteSaver(base):
        append_only: frozenset[str] = frozenset({"rounds"})
        """Channels only ever extended or reset (a tuple of tuples): stored by reference.

        The PaCoRe state's ``rounds`` (prepare resets it, compaction appends a
        round); a channel changed any other way must not be named here."""

        def __init__(self, conn: Any, *, serde: Any = None) -> None:
            super().__init__(conn, serde=serde)
            self._rows: list[tuple[str, tuple[Any, ...]]] = []
            self._batch: asyncio.Future[None] | None = None
            self._flushes: set[asyncio.Task[None]] = set()
            self._whole: set[tuple[str, str]] = set()  # threads written whole (legacy)
            self._skipped: dict[str, set[str]] = {}  # thread -> checkpoint ids not written
            self._unsaved: dict[str, set[str]] = {}  # thread -> channels they changed
            # thread -> namespace -> append-only channel -> what was written last
            # (least recently written thread first; see _REFS_KEPT).
            self._written: dict[str, dict[str, dict[str, _Written]]] = {}
            # Threads with checkpoints (read at set-up, then kept up to date): the file is
            # this run's alone (its output is locked), so a thread outside it has none.
            self._known: set[str] | None = None
            self._journaled: set[str] = set()  # threads with journal rows at set-up
            self.checkpoint_before: frozenset[str] | None = None
            """Nodes that call a model: when set, a top-level checkpoint is written only
            if one of them (or a ``Send``) runs next; see :func:`_group_commit_saver`."""
            self.writer: sqlite3.Connection

        async def setup(self) -> None:
            first = not self.is_setup
            await super().setup()
            if first:
                async with self.lock:
                    await self.conn.execute(_BLOBS_TABLE)
                    await self.conn.execute(_JOURNAL_TABLE)
                    await self.conn.commit()
                    async with self.conn.execute(
                        "SELECT DISTINCT thread_id FROM checkpoints"
                    ) as cur:
                        self._known = {str(row[0]) for row in await cur.fetchall()}
                    async with self.conn.execute(
                        "SELECT DISTINCT thread_id FROM pacore_journal"
                    ) as cur:
                        self._journaled = {str(row[0]) for row in await cur.fetchall()}

        def has_checkpoints(self, thread_id: str) -> bool:
            """Whether LangGraph checkpoints exist for ``thread_id`` (known since set-up)."""
            return self._known is None or str(thread_id) in self._known

        async def journal_replay(self, thread: str, key: str) -> tuple[Any, ...] | None:
            """The explorer results journaled under ``key`` (:mod:`pacore_graph.graph.journal`).

            A thread with no journal rows when the file was opened has none now
            but those this process wrote, which its graph does not ask for
            again: no read for it, as for a new problem's checkpoint.
            """
            if thread not in self._journaled:
                return None
            row = await self.guard.call(lambda: self._journal_row(thread, key))
            if row is None:
                return None
            if row[0] == _TRAJECTORIES:
                return tuple(Trajectory.from_dict(item) for item in ormsgpack.unpackb(row[1]))
            return tuple(self.serde.loads_typed((row[0], row[1])))

        async def _journal_row(self, thread: str, key: str) -> Any:
            return self.writer.execute(_GET_JOURNAL, (thread, key)).fetchone()

        async def journal_record(self, thread: str, key: str, trajectories: Any) -> None:
            """Journal one explorer call's results; returns once they are committed.

            Written as plain msgpack maps (ormsgpack encodes the dataclasses
            natively, 3x faster than the checkpoint serializer's typed
            extensions) and read back with ``Trajectory.from_dict``; a
            trajectory holding something msgpack cannot write goes through
            the checkpoint serializer instead.
            """
            items = list(trajectories)
            try:
                typed: tuple[str, bytes] = (_TRAJECTORIES, ormsgpack.packb(items))
            except (ormsgpack.MsgpackEncodeError, TypeError):
                typed = self.serde.dumps_typed(items)
            await self.guard.call(lambda: self._commit([(_PUT_JOURNAL, (thread, key, *typed))]))

        def _restore(self, found: Any, *, remember: bool = False) -> Any:
            """A checkpoint tuple with its channel values back from ``pacore_blobs``.

            ``remember``: the checkpoint a thread goes on from (the latest), whose
            references to append-only items the next writes reuse.
            """
            if found is None:
                return None
            checkpoint = found.checkpoint
            conf = found.config["configurable"]
            key = (str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")))
            if not checkpoint.pop(_BLOBS, False):
                if checkpoint.get("channel_values"):
                    self._whole.add(key)
                return found
            values: dict[str, Any] = {}
            for channel, version in checkpoint["channel_versions"].items():
                row = self.writer.execute(_GET_BLOB, (*key, channel, str(version))).fetchone()
                if row is None or row[0] == "empty":
                    continue
                if row[0] != _REFS:
                    values[channel] = self.serde.loads_typed((row[0], row[1]))
                    continue
                refs: list[list[str]] = json.loads(row[1])
                value = tuple(self._item(key, name, item_version) for name, item_version in refs)
                values[channel] = value
                if remember:
                    self._remember(key, channel, value, refs)
            checkpoint["channel_values"] = values
            return found

        def _item(self, key: tuple[str, str], name: str, version: str) -> tuple[Any, ...]:
            """One append-only item (``rounds/<i>``), a tuple as it was written."""
            row = self.writer.execute(_GET_BLOB, (*key, name, version)).fetchone()
            if row is None:  # only a damaged file: the run stops with one line naming it
                raise sqlite3.DatabaseError(f"thread {key[0]}: checkpoint row {name} is missing")
            return tuple(self.serde.loads_typed((row[0], row[1])))

        def _remember(
            self, key: tuple[str, str], channel: str, value: tuple[Any, ...], refs: list[list[str]]
        ) -> None:
            """Keep ``value`` and its references as the last written; forget the oldest thread."""
            thread, ns = key
            spaces = self._written.pop(thread, None) or {}
            spaces.setdefault(ns, {})[channel] = (value, refs)
            self._written[thread] = spaces  # now the most recently written
            while len(self._written) > _REFS_KEPT:
                del self._written[next(iter(self._written))]

        def _by_reference(
            self, key: tuple[str, str], channel: str, version: str, value: tuple[Any, ...]
        ) -> tuple[list[list[str]], list[tuple[str, tuple[Any, ...]]]]:
            """References to every item of ``value``, and the rows of the items not yet written.

            The items last written are reused when ``value`` starts with them (the
            same objects in a run and after a resume; equality is the fallback);
            otherwise (shrunk, or a different start) every item is written again.
            """
            written = self._written.get(key[0], {}).get(key[1], {}).get(channel)
            refs: list[list[str]] = []
            if written is not None:
                last, last_refs = written
                if len(last) <= len(value) and all(
                    a is b or a == b for a, b in zip(last, value, strict=False)
                ):
                    refs = list(last_refs)
            rows: list[tuple[str, tuple[Any, ...]]] = []
            for index in range(len(refs), len(value)):
                name = f"{channel}/{index}"
                typed = self.serde.dumps_typed(value[index])
                rows.append((_PUT_BLOB, (*key, name, version, *typed)))
                refs.append([name, version])
            return refs, rows

        async def aget_tuple(self, config: Any) -> Any:
            conf = config["configurable"]
            if (
                self._known is not None
                and str(conf["thread_id"]) not in self._known
                and not conf.get("checkpoint_id")
            ):
                return None  # a thread nothing was written for: no read (a thread hop each)
            latest = not conf.get("checkpoint_id")
            return self._restore(await super().aget_tuple(config), remember=latest)

        async def alist(self, config: Any, **kwargs: Any) -> Any:
            async for found in super().alist(config, **kwargs):
                yield self._restore(found)

        async def _commit(self, rows: list[tuple[str, tuple[Any, ...]]]) -> None:
            self._rows.extend(rows)
            batch = self._batch
            if batch is None:
                loop = asyncio.get_running_loop()
                batch = self._batch = loop.create_future()
                task = loop.create_task(self._flush(batch))
                self._flushes.add(task)
                task.add_done_callback(self._flushes.discard)
            await asyncio.shield(batch)

        async def _flush(self, batch: asyncio.Future[None]) -> None:
            await asyncio.sleep(0)  # let the writers of this turn join
            rows, self._rows, self._batch = self._rows, [], None
            try:
                # On the loop's own thread: a WAL commit without fsync takes
                # well under a millisecond, while a hop to aiosqlite's thread
                # cost about 2 ms of GIL hand-over each (profiled).
                self.writer.execute("BEGIN")
                try:
                    for sql, group in itertools.groupby(rows, key=lambda row: row[0]):
                        self.writer.executemany(sql, [params for _, params in group])
                except BaseException:
                    self.writer.execute("ROLLBACK")
                    raise
                self.writer.execute("COMMIT")
            except BaseException as exc:
                # The callers awaiting ``batch`` raise it; re-raising here too would
                # leave this unawaited task's exception "never retrieved" (a full
                # disk printed one such traceback per flush).
                if not batch.done():
                    batch.set_exception(exc)
                    batch.exception()  # retrieved: callers re-raise it
                if isinstance(exc, asyncio.CancelledError):
                    raise
                return
            if not batch.done():
                batch.set_result(None)

        async def adelete_thread(self, thread_id: str) -> None:
            # Through the writer too: a write on aiosqlite's connection would
            # hold the lock while the loop thread waits on it.
            await self._commit(
                [
                    ("DELETE FROM checkpoints WHERE thread_id = ?", (str(thread_id),)),
                    ("DELETE FROM writes WHERE thread_id = ?", (str(thread_id),)),
                    ("DELETE FROM pacore_blobs WHERE thread_id = ?", (str(thread_id),)),
                    ("DELETE FROM pacore_journal WHERE thread_id = ?", (str(thread_id),)),
                ]
            )
            self._journaled.discard(str(thread_id))
            # In place: the graph's copy of this saver (``with_pacore_types``) shares the set.
            self._whole.difference_update({key for key in self._whole if key[0] == str(thread_id)})
            self._skipped.pop(str(thread_id), None)
            self._unsaved.pop(str(thread_id), None)
            self._written.pop(str(thread_id), None)
            if self._known is not None:
                self._known.discard(str(thread_id))

        def _needless(self, conf: Any, checkpoint: Any, new_versions: Any) -> bool:
            """Whether no model call follows this top-level checkpoint (``checkpoint_before``)."""
            nodes = self.checkpoint_before
            if nodes is None or conf["checkpoint_ns"]:
                return False
            if _SENDS in new_versions and checkpoint["channel_values"].get(_SENDS):
                return False  # Sends go out next (consumed ones leave the channel empty)
            return not any(
                channel[len(_BRANCH) :] in nodes
                for channel in new_versions
                if channel.startswith(_BRANCH)
            )

        async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            conf = config["configurable"]
            thread, ns = str(conf["thread_id"]), str(conf["checkpoint_ns"])
            saved = {
                "configurable": {
                    "thread_id": conf["thread_id"],
                    "checkpoint_ns": conf["checkpoint_ns"],
                    "checkpoint_id": checkpoint["id"],
                }
            }
            if self._needless(conf, checkpoint, new_versions):
                self._skipped.setdefault(thread, set()).add(checkpoint["id"])
                self._unsaved.setdefault(thread, set()).update(new_versions)
                return saved
            if self._known is not None:
                self._known.add(thread)
            unsaved = self._unsaved.pop(thread, None) if not ns else None
            if unsaved:  # channels changed by skipped steps: their values go with this one
                versions = checkpoint["channel_versions"]
                new_versions = {
                    **{ch: versions[ch] for ch in unsaved if ch in versions},
                    **new_versions,
                }
            rows: list[tuple[str, tuple[Any, ...]]] = []
            referenced: list[tuple[str, tuple[Any, ...], list[list[str]]]] = []
            if (thread, ns) not in self._whole:
                values = checkpoint["channel_values"]
                for channel, version in new_versions.items():
                    value = values.get(channel)
                    if channel not in values:
                        typed = ("empty", b"")
                    elif channel in self.append_only and _is_tuple_of_tuples(value):
                        refs, items = self._by_reference((thread, ns), channel, str(version), value)
                        rows.extend(items)
                        referenced.append((channel, value, refs))
                        typed = (_REFS, json.dumps(refs).encode())
                    else:
                        typed = self.serde.dumps_typed(value)
                    rows.append((_PUT_BLOB, (thread, ns, channel, str(version), *typed)))
                checkpoint = {**checkpoint, "channel_values": {}, _BLOBS: 1}
            type_, blob = self.serde.dumps_typed(checkpoint)
            meta = json.dumps(get_checkpoint_metadata(config, metadata), ensure_ascii=False)
            await self._commit(
                [
                    *rows,
                    (
                        "INSERT OR REPLACE INTO checkpoints (thread_id, checkpoint_ns, "
                        "checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (
                            str(conf["thread_id"]),
                            conf["checkpoint_ns"],
                            checkpoint["id"],
                            conf.get("checkpoint_id"),
                            type_,
                            blob,
                            meta.encode("utf-8", "ignore"),
                        ),
                    ),
                ]
            )
            for channel, value, refs in referenced:  # only once its rows are committed
                self._remember((thread, ns), channel, value, refs)
            return saved

        async def aput_writes(
            self, config: Any, writes: Any, task_id: str, task_path: str = ""
        ) -> None:
            conf = config["configurable"]
            if conf.get("checkpoint_id") in self._skipped.get(str(conf["thread_id"]), ()):
                return  # a step after a skipped checkpoint: redone from the last one kept
            verb = "REPLACE" if all(w[0] in WRITES_IDX_MAP for w in writes) else "IGNORE"
            sql = (
                f"INSERT OR {verb} INTO writes (thread_id, checkpoint_ns, checkpoint_id, "
                "task_id, task_path, idx, channel, type, value) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
            )
            conf = config["configurable"]
            await self._commit(
                [
                    (
                        sql,
                        (
                            str(conf["thread_id"]),
                            str(conf["checkpoint_ns"]),
                            str(conf["checkpoint_id"]),
                            task_id,
                            task_path,
                            WRITES_IDX_MAP.get(channel, idx),
                            channel,
                            *self.serde.dumps_typed(value),
                        ),
                    )
                    for idx, (channel, value) in enumerate(writes)
                ]
            )

    return GroupCommitSqliteSaver
