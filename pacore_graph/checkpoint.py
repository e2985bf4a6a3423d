"""Checkpointers for the PaCoRe graph: which types it stores, and where.

A PaCoRe run's state holds this package's frozen records (trajectories,
results, the ``ExploreTask`` of every pending ``Send``). LangGraph's
serializer restores such objects only when their types are *registered*:
unregistered ones load with a "Deserializing unregistered type" warning
today and are refused under ``LANGGRAPH_STRICT_MSGPACK=true``.
:data:`SERDE_ALLOWLIST` lists them; :func:`with_pacore_types` registers
them with any LangGraph checkpointer (``build_pacore_graph(checkpointer=...)``
does it for you), and :func:`pacore_serde` is a serializer to hand to your
own checkpointer when PaCoRe is a node of your checkpointed graph.

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
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from pacore_graph.config import SamplingParams
from pacore_graph.explorer import ExploreTask
from pacore_graph.filenames import EVAL_CHECKPOINT_FILE, RUN_CHECKPOINT_SUFFIX
from pacore_graph.records import Completion, PaCoReResult, ToolCallRecord, Trajectory
from pacore_graph.state import RunShape

__all__ = [
    "DEFAULT_DURABILITY",
    "EVAL_CHECKPOINT_FILE",
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

#: Dataset runs checkpoint with this durability (chosen from bench_core's figures).
DEFAULT_DURABILITY: Durability = "async"


_POSTGRES_POOL = 8

_TYPES: tuple[type, ...] = (
    Trajectory,
    ToolCallRecord,
    PaCoReResult,
    Completion,
    ExploreTask,
    RunShape,
    SamplingParams,
)

#: ``(module, name)`` of every type the PaCoRe graph's state and ``Send`` payloads hold.
SERDE_ALLOWLIST: frozenset[tuple[str, str]] = frozenset(
    (cls.__module__, cls.__name__) for cls in _TYPES
)


def pacore_serde(extra: Iterable[tuple[str, str] | type] = ()) -> JsonPlusSerializer:
    """A serializer that restores PaCoRe's types (plus ``extra``) and nothing unregistered."""
    keys = set(SERDE_ALLOWLIST)
    for item in extra:
        keys.add((item.__module__, item.__name__) if isinstance(item, type) else tuple(item))  # type: ignore[arg-type]
    return JsonPlusSerializer(allowed_msgpack_modules=sorted(keys))


def with_pacore_types(checkpointer: Any) -> Any:
    """``checkpointer`` with PaCoRe's types registered with its serializer.

    A saver on LangGraph's default serializer (which loads anything, with a
    warning per unregistered type) gets :func:`pacore_serde`; one whose
    serializer already has an allowlist gets PaCoRe's types added to it.
    ``None``, ``True`` and ``False`` (a subgraph's "inherit", "own", "none")
    pass through.
    """
    if not isinstance(checkpointer, BaseCheckpointSaver):
        return checkpointer
    serde = checkpointer.serde
    allowed = getattr(serde, "_allowed_msgpack_modules", None)
    if type(serde) is JsonPlusSerializer and allowed is True:
        clone = copy.copy(checkpointer)
        clone.serde = pacore_serde()
        return _typed(clone)
    return checkpointer.with_allowlist(SERDE_ALLOWLIST)


def _typed(saver: Any) -> Any:
    from langgraph.checkpoint.base import maybe_add_typed_methods

    saver.serde = maybe_add_typed_methods(saver.serde)
    return saver


def with_checkpointer(graph: Any, checkpointer: Any) -> Any:
    """A copy of a compiled graph that checkpoints to ``checkpointer`` (types registered)."""
    return graph.copy(update={"checkpointer": with_pacore_types(checkpointer)})


def default_checkpoint_path(output: Path, *, eval_dir: bool = False) -> Path:
    """Where a dataset run keeps its checkpoints unless ``--checkpoint`` says otherwise."""
    if eval_dir:
        return output / EVAL_CHECKPOINT_FILE
    return output.with_name(output.name + RUN_CHECKPOINT_SUFFIX)


@asynccontextmanager
async def open_checkpointer(spec: str | None, default: Path) -> AsyncIterator[Any]:
    """The saver ``--checkpoint SPEC`` names, open for the block (``None`` when off).

    ``spec`` None means the SQLite file ``default``. Raises ``ValueError``
    with a one-line reason for a spec it cannot use.
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
        async with _postgres(AsyncPostgresSaver, spec) as saver:
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
    import aiosqlite

    path.parent.mkdir(parents=True, exist_ok=True)
    async with aiosqlite.connect(str(path)) as conn:
        # WAL with synchronous=NORMAL: a commit survives the process being
        # killed (SIGKILL), only not a power cut, and skips the fsync per
        # commit that made the saver fall behind a fast run (measured: a
        # backlog of unsaved explorer results at the kill, redone on resume).
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA synchronous=NORMAL")
        yield with_pacore_types(AsyncSqliteSaver(conn))


@asynccontextmanager
async def _postgres(saver_cls: Any, url: str) -> AsyncIterator[Any]:
    """An ``AsyncPostgresSaver`` on a small pool of ``url`` connections, tables set up.

    A pool, not LangGraph's one-connection default: every finished explorer's
    writes are one round trip, and on one shared connection they queued up
    behind each other, so a killed run had lost most of what had come back
    (measured: 88-96 of 96 samples redone). ``synchronous_commit=off`` skips
    the server's WAL flush per commit; the client being killed cannot lose a
    committed write that way, only a crash of the database server could.
    Raises ``ValueError`` (one line) when the server cannot be used.
    """
    import psycopg
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    pool = AsyncConnectionPool(
        url,
        min_size=1,
        max_size=_POSTGRES_POOL,
        open=False,
        kwargs={
            "autocommit": True,
            "prepare_threshold": 0,
            "row_factory": dict_row,
            "options": "-c synchronous_commit=off",
        },
    )
    try:
        await pool.open(wait=True, timeout=30)
        saver = saver_cls(conn=pool)
        await saver.setup()
    except (psycopg.Error, TimeoutError, OSError) as exc:
        await pool.close()
        text = str(exc).strip()
        reason = text.splitlines()[0] if text else type(exc).__name__
        raise ValueError(f"--checkpoint: cannot use PostgreSQL: {reason}") from None
    try:
        yield saver
    finally:
        await pool.close()
