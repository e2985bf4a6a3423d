"""Which types a PaCoRe checkpoint stores, and the serializer that restores them.

A PaCoRe run's state holds this package's frozen records (trajectories,
results, the ``ExploreTask`` of every pending ``Send``). LangGraph's
serializer restores such objects only when their types are *registered*:
unregistered ones load with a "Deserializing unregistered type" warning
today and are refused under ``LANGGRAPH_STRICT_MSGPACK=true``.
:data:`SERDE_ALLOWLIST` lists them; :func:`with_pacore_types` registers
them with any LangGraph checkpointer (``build_pacore_graph(checkpointer=...)``
does it for you), and :func:`pacore_serde` is a serializer to hand to your
own checkpointer when PaCoRe is a node of your checkpointed graph.

Why here, in the graph layer, and not beside the savers in
:mod:`pacore_graph.runs.checkpoint`: the registry is about the graph's own
types, and the graph builder needs it; opening a saver from a spec is run
control above the graph (issue 19, part 3).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from typing import Any

import ormsgpack
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde import jsonplus as _jsonplus
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Send

from pacore_graph.graph.explorer import ExploreGroup, ExploreTask
from pacore_graph.graph.plans import ExplorerPrompt, RoundPrompts
from pacore_graph.graph.state import RunShape
from pacore_graph.settings.config import SamplingParams
from pacore_graph.settings.rounds import Round
from pacore_graph.values.records import Completion, PaCoReResult, ToolCallRecord, Trajectory

__all__ = ["LEGACY_MODULES", "SERDE_ALLOWLIST", "pacore_serde", "with_pacore_types"]

_TYPES: tuple[type, ...] = (
    Trajectory,
    ToolCallRecord,
    PaCoReResult,
    Completion,
    ExploreTask,
    ExploreGroup,
    RunShape,
    SamplingParams,
    Round,
    RoundPrompts,
    ExplorerPrompt,
)

#: ``(module, name)`` of every type the PaCoRe graph's state and ``Send`` payloads hold.
SERDE_ALLOWLIST: frozenset[tuple[str, str]] = frozenset(
    (cls.__module__, cls.__name__) for cls in _TYPES
)

#: Field names of PaCoRe's dataclasses, for the serializer's fast path.
_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls))
    for cls in _TYPES
    if dataclasses.is_dataclass(cls)
}


def pacore_serde(extra: Iterable[tuple[str, str] | type] = ()) -> JsonPlusSerializer:
    """A serializer that restores PaCoRe's types (plus ``extra``) and nothing unregistered."""
    keys = set(SERDE_ALLOWLIST)
    for item in extra:
        keys.add((item.__module__, item.__name__) if isinstance(item, type) else tuple(item))  # type: ignore[arg-type]
    return _FastSerializer(allowed_msgpack_modules=sorted(keys))


#: Where the checkpointed types lived before: a checkpoint written then names
#: these paths. The first four are from before the layer folders (issue 19,
#: part 2); ``graph.records`` is from before the values had a folder of their
#: own (issue 33, part 2).
LEGACY_MODULES: dict[str, str] = {
    "pacore_graph.records": "pacore_graph.values.records",
    "pacore_graph.graph.records": "pacore_graph.values.records",
    "pacore_graph.explorer": "pacore_graph.graph.explorer",
    "pacore_graph.state": "pacore_graph.graph.state",
    "pacore_graph.config": "pacore_graph.settings.config",
}
_LEGACY_MARKS = tuple(old.encode() for old in LEGACY_MODULES)
_CONSTRUCTOR_EXTS = frozenset(
    {
        _jsonplus.EXT_CONSTRUCTOR_SINGLE_ARG,
        _jsonplus.EXT_CONSTRUCTOR_POS_ARGS,
        _jsonplus.EXT_CONSTRUCTOR_KW_ARGS,
        _jsonplus.EXT_METHOD_SINGLE_ARG,
        _jsonplus.EXT_PYDANTIC_V1,
        _jsonplus.EXT_PYDANTIC_V2,
    }
)


def _renamed(code: int, data: bytes) -> bytes:
    """The extension's payload with legacy module paths (its nested ones included) renamed."""
    if code not in _CONSTRUCTOR_EXTS or not any(mark in data for mark in _LEGACY_MARKS):
        return data
    value = ormsgpack.unpackb(data, ext_hook=_renamed_ext, option=ormsgpack.OPT_NON_STR_KEYS)
    if isinstance(value, list) and value and isinstance(value[0], str):
        value[0] = LEGACY_MODULES.get(value[0], value[0])
    return ormsgpack.packb(value, option=ormsgpack.OPT_NON_STR_KEYS)


def _renamed_ext(code: int, data: bytes) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, _renamed(code, data))


def _legacy_aware(hook: Any) -> Any:
    """``hook`` reading records saved under :data:`LEGACY_MODULES` as today's types.

    Only extensions naming an old path pay for the rename (a byte search
    finds them); everything else goes to ``hook`` untouched.
    """

    def ext_hook(code: int, data: bytes) -> Any:
        return hook(code, _renamed(code, data))

    return ext_hook


class _FastSerializer(JsonPlusSerializer):
    """LangGraph's serializer, writing PaCoRe's records and ``Send`` the same bytes faster.

    LangGraph's msgpack hook tries some fifteen ``hasattr``/``isinstance``
    tests before it reaches "dataclass" -- one of them against the
    runtime-checkable ``SendProtocol``, the slowest -- for every record of
    every checkpoint (profiled on ``bench_core``'s workload: a third of the
    checkpointed run's CPU). This hook knows PaCoRe's dataclasses and
    ``Send`` up front and emits exactly the extension LangGraph would, so
    anything written here loads with the stock serializer, and vice versa.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._unpack_ext_hook = _legacy_aware(self._unpack_ext_hook)

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[Any]) -> JsonPlusSerializer:
        """A clone with more types allowed, still reading the legacy paths."""
        clone = super().with_msgpack_allowlist(extra_allowlist)
        if clone is not self:
            clone._unpack_ext_hook = _legacy_aware(clone._unpack_ext_hook)
        return clone

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if obj is None or isinstance(obj, (bytes, bytearray)):
            return super().dumps_typed(obj)
        try:
            return "msgpack", _fast_enc(obj)
        except ormsgpack.MsgpackEncodeError:
            return super().dumps_typed(obj)


def _fast_enc(data: Any) -> bytes:
    return ormsgpack.packb(data, default=_fast_default, option=_jsonplus._option)


def _fast_default(obj: Any) -> Any:
    cls = type(obj)
    if cls is ExploreGroup:
        return ormsgpack.Ext(
            _jsonplus.EXT_CONSTRUCTOR_KW_ARGS,
            _fast_enc((cls.__module__, cls.__name__, obj.checkpoint_kwargs())),
        )
    names = _FIELDS.get(cls)
    if names is not None:
        return ormsgpack.Ext(
            _jsonplus.EXT_CONSTRUCTOR_KW_ARGS,
            _fast_enc((cls.__module__, cls.__name__, {name: getattr(obj, name) for name in names})),
        )
    if cls is Send:
        args: tuple[Any, ...] = (obj.node, obj.arg)
        if (timeout := getattr(obj, "timeout", None)) is not None:
            args = (obj.node, obj.arg, timeout)
        return ormsgpack.Ext(
            _jsonplus.EXT_CONSTRUCTOR_POS_ARGS,
            _fast_enc((cls.__module__, cls.__name__, args)),
        )
    return _jsonplus._msgpack_default(obj)


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
