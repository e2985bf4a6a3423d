"""Checkpointers for the PaCoRe graph: which types it stores, and where.

Which types a checkpoint stores, and the serializer that restores them, live
in the graph layer (:mod:`pacore_graph.graph.checkpoint_types`, whose names
are re-exported here): the graph builder registers them with any saver.

:func:`open_checkpointer` turns the CLI's ``--checkpoint`` value into a
saver: ``none`` (off), ``memory``, a ``postgresql://`` URL (Postgres), or a
SQLite file (``sqlite:///path`` or a plain path). Dataset runs keep theirs
beside their output by default: :data:`RUN_CHECKPOINT_SUFFIX` and
:data:`EVAL_CHECKPOINT_FILE`. This module opens stores; the SQLite store
itself (group commits, the explorer journal, its tables and what a row
holds) is :mod:`pacore_graph.runs.sqlite_store`, imported only when a SQLite
file is opened. The PostgreSQL and memory stores are LangGraph's own savers.

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
from typing import TYPE_CHECKING, Any, Literal

from pacore_graph.graph.checkpoint_types import (
    LEGACY_MODULES,
    SERDE_ALLOWLIST,
    pacore_serde,
    with_pacore_types,
)
from pacore_graph.runs.filenames import EVAL_CHECKPOINT_FILE, RUN_CHECKPOINT_SUFFIX
from pacore_graph.runs.private_files import FILE_MODE, private_dir
from pacore_graph.runs.store_guard import (
    DEFAULT_STORE_RETRY_S,
    StoreGuard,
    guarded_saver_class,
    redact_store,
)

if TYPE_CHECKING:
    from pacore_graph.runs.sqlite_store import GroupCommitSqliteSaver

__all__ = [
    "DEFAULT_DURABILITY",
    "EVAL_CHECKPOINT_FILE",
    "LEGACY_MODULES",
    "RUN_CHECKPOINT_SUFFIX",
    "SERDE_ALLOWLIST",
    "CheckpointDurability",
    "default_checkpoint_path",
    "open_checkpointer",
    "pacore_serde",
    "with_checkpointer",
    "with_pacore_types",
]

#: When LangGraph persists a step's checkpoint (the modes above). Not named
#: ``Durability``: that is ``langgraph.types.Durability``, which a caller
#: star-importing both would lose; the old name stays below for old imports.
CheckpointDurability = Literal["sync", "async", "exit"]
Durability = CheckpointDurability

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
DEFAULT_DURABILITY: CheckpointDurability = "sync"


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
        from pacore_graph.runs import sqlite_store
    except ModuleNotFoundError as exc:
        if (exc.name or "pacore_graph").startswith("pacore_graph"):
            raise
        raise ValueError(
            "checkpoints need langgraph-checkpoint-sqlite "
            "(pip install langgraph-checkpoint-sqlite), or pass --checkpoint none"
        ) from None
    async with _sqlite(sqlite_store.GroupCommitSqliteSaver, path) as saver:
        yield with_pacore_types(saver)


@asynccontextmanager
async def _sqlite(saver_cls: type[GroupCommitSqliteSaver], path: Path) -> AsyncIterator[Any]:
    """A :class:`~pacore_graph.runs.sqlite_store.GroupCommitSqliteSaver` on ``path``, guarded.

    ``ValueError`` naming the file if it is unusable: a file that is not a
    database (or is corrupt where the set-up reads), or that cannot be
    created, is refused here, before any model call. The file's layout is
    :mod:`pacore_graph.runs.sqlite_store`'s.
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
            saver = guarded_saver_class(saver_cls)(conn)
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
