"""The SQLite checkpoint store: LangGraph's SQLite saver, group commits, and the explorer journal.

:class:`GroupCommitSqliteSaver` is what ``--checkpoint FILE`` (the default of
dataset runs) writes to; :func:`pacore_graph.runs.checkpoint.open_checkpointer`
opens it on a file. It is LangGraph's ``AsyncSqliteSaver`` with the same
tables plus two of its own, written so that a run with thousands of explorer
tasks pays little for being durable (``docs/durable-runs.md`` has the
figures). A file written by LangGraph's own saver, or by this one before any
of the levers below, still resumes.

Storage layout
--------------

One SQLite file, in WAL mode with ``synchronous=NORMAL`` (a commit survives
the process being killed, not a power cut). Four tables; ``thread_id`` is a
problem's checkpointer thread (a dataset run deletes every row of a thread
once the problem's line is written), ``checkpoint_ns`` the subgraph
namespace (``''`` at the top level)::

    checkpoints   (thread_id, checkpoint_ns, checkpoint_id) -> parent_checkpoint_id,
                  type, checkpoint, metadata                      LangGraph's
    writes        (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) -> task_path,
                  channel, type, value                             LangGraph's
    pacore_blobs  (thread_id, checkpoint_ns, channel, version) -> type, blob
    pacore_journal (thread_id, key) -> type, blob

- ``checkpoints``: one row per checkpoint written, as LangGraph lays it out;
  ``type``/``checkpoint`` are the serializer's typed encoding of the
  checkpoint, ``metadata`` its JSON. A row whose checkpoint carries the key
  ``"pacore_blobs": 1`` has empty
  ``channel_values``: each value is a ``pacore_blobs`` row at the version
  the checkpoint's ``channel_versions`` names. A row without it (LangGraph's
  own saver, or this one before issue 22) holds the whole state, and its
  thread goes on being written whole.
- ``writes``: a finished task's writes ("pending writes"), LangGraph's
  layout; ``INSERT OR REPLACE`` for LangGraph's special channels
  (``WRITES_IDX_MAP``), ``INSERT OR IGNORE`` otherwise, as its saver does.
- ``pacore_blobs``: one channel's value at one version (``type``, ``blob``:
  the serializer's typed encoding; ``type`` ``"empty"`` for a channel with
  no value). An append-only channel (:attr:`GroupCommitSqliteSaver.append_only`,
  the state's ``rounds``) is a row of type ``pacore_refs`` whose blob is a
  JSON list of ``[name, version]`` references, one per item; each item is
  its own row, ``channel`` ``rounds/<i>`` at the version its item was first
  written, so a round's trajectories are encoded once however many
  checkpoints follow.
- ``pacore_journal``: the explorer journal (:mod:`pacore_graph.graph.journal`),
  one row per explorer call of a journaled run, keyed by
  :func:`~pacore_graph.graph.journal.journal_key`; ``type``
  ``pacore_trajectories`` and a msgpack list of trajectory maps (read back
  with ``Trajectory.from_dict``), or the serializer's typed encoding for a
  trajectory msgpack cannot write. A journaled run writes no
  ``checkpoints`` at all (:mod:`pacore_graph.runs.fanout`).

Writes: the group commit
------------------------

Every write (``aput``, ``aput_writes``, ``adelete_thread``, ``journal_record``)
goes through one plain ``sqlite3`` connection on the event loop's thread
(:attr:`~GroupCommitSqliteSaver.writer`, set by the opener), not through
aiosqlite's thread: the rows of every write issued in the same turn of the
event loop go in one transaction (``executemany`` per statement, one
COMMIT), and each caller returns only once its rows are committed, so what
LangGraph believes saved is saved. Reads go through LangGraph's aiosqlite
connection (``conn``). A failed commit is raised to every caller of its
batch.

Failures: the store guard
-------------------------

The opener wraps the class with
:func:`~pacore_graph.runs.store_guard.guarded_saver_class` and sets its
``guard``: every asynchronous call (and the journal's) goes through
:class:`~pacore_graph.runs.store_guard.StoreGuard`, which turns a SQLite
error or ``OSError`` (a full disk, a corrupt page: waiting would not help)
into one :class:`~pacore_graph.runs.store_guard.StoreError` naming the file,
at its first occurrence; the fan-out then stops the run, and the same
command resumes it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
from typing import Any

import ormsgpack
from langgraph.checkpoint.base import WRITES_IDX_MAP, get_checkpoint_metadata
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from pacore_graph.runs.store_guard import StoreGuard
from pacore_graph.values.records import Trajectory

__all__ = ["GroupCommitSqliteSaver"]


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
#: its own row (see :class:`GroupCommitSqliteSaver`).
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


class GroupCommitSqliteSaver(AsyncSqliteSaver):
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
    saver, untouched: it writes each changed channel's whole value.

    Fewer checkpoints: with ``checkpoint_before`` set (the nodes that call a
    model; ``pacore run --input`` sets ``{"explore"}``), a top-level
    checkpoint is written only when a ``Send`` or one of those nodes runs
    next, and the writes of the steps after a skipped one are dropped. A
    resume starts from the last checkpoint kept, re-applies the saved
    explorer results and runs the cheap steps (prepare, round, compact,
    finalize: no model calls) again, so no finished sample is asked again.
    """

    append_only: frozenset[str] = frozenset({"rounds"})
    """Channels only ever extended or reset (a tuple of tuples): stored by reference.

    The PaCoRe state's ``rounds`` (prepare resets it, compaction appends a
    round); a channel changed any other way must not be named here."""

    writer: sqlite3.Connection
    """The connection every write goes through, on the event loop's thread (set by the opener)."""

    guard: StoreGuard
    """The store's failure policy; the journal's reads and writes go through it (set by the
    opener, with :func:`~pacore_graph.runs.store_guard.guarded_saver_class` for the rest)."""

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
        if one of them (or a ``Send``) runs next; see the class docstring."""

    async def setup(self) -> None:
        first = not self.is_setup
        await super().setup()
        if first:
            async with self.lock:
                await self.conn.execute(_BLOBS_TABLE)
                await self.conn.execute(_JOURNAL_TABLE)
                await self.conn.commit()
                async with self.conn.execute("SELECT DISTINCT thread_id FROM checkpoints") as cur:
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
