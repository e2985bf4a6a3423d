"""Per-run settings from ``config["configurable"]``: one graph, many run shapes.

A served graph (``langgraph dev``, LangGraph Platform) is built once, but its
callers want to choose per request how hard to think::

    await graph.ainvoke(state, {"configurable": {"preset": "high"}})
    await graph.ainvoke(state, {"configurable": {"rounds": [3], "temperature": 0.6}})

:class:`RunSettings` names the keys read (any other ``configurable`` key, such
as ``thread_id``, is LangGraph's or the caller's and is ignored). They are
validated like :class:`~pacore_graph.settings.config.PaCoReConfig`: a bad value fails
that run, before any model call, with a message naming the field. What is
not given keeps the value the graph was built with.

A caller is not trusted with code or with unbounded work:

- ``compactor`` resolves through the graph's
  :class:`~pacore_graph.graph.compactor_registry.CompactorRegistry` (the built-ins
  and the names the deployment registered): nothing a run names is imported;
- ``rounds``/``preset`` and ``max_tokens`` go through the graph's
  :class:`~pacore_graph.settings.request_limits.RequestLimits` (16 rounds, 4096 samples
  per run, 131072 tokens per call by default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pacore_graph.errors import PaCoReError
from pacore_graph.graph.compactor_registry import CompactorRegistry
from pacore_graph.settings.config import PRESETS, PaCoReConfig, PresetName
from pacore_graph.settings.request_limits import (
    DEFAULT_MAX_ROUNDS,
    RequestLimitError,
    RequestLimits,
)

__all__ = ["MAX_RUN_ROUNDS", "RunSettings", "SettingsError", "resolve_settings"]

#: Rounds a per-run ``rounds`` may hold by default (``RequestLimits.max_rounds``;
#: the graph's recursion limit is set from the limits it was built with).
MAX_RUN_ROUNDS = DEFAULT_MAX_ROUNDS
#: Longest list a per-run ``rounds`` is even parsed from (any cap is lower).
_ROUNDS_PARSE_CEILING = 1024


class SettingsError(PaCoReError, ValueError):
    """A per-run setting in ``config["configurable"]`` is invalid."""


class RunSettings(BaseModel):
    """The ``configurable`` keys a PaCoRe graph reads per run (all optional)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    preset: PresetName | None = Field(None, description="low=[4], medium=[16], high=[32, 4]")
    rounds: list[int] | None = Field(
        None,
        max_length=_ROUNDS_PARSE_CEILING,
        description="Round widths K, e.g. [8, 2]; a final K=1 round is added.",
    )
    compactor: str | None = Field(
        None,
        max_length=200,
        description="conclusion | answer | budget:N | a name the deployment registered",
    )
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    max_tokens: int | None = Field(None, ge=1)
    seed: int | None = Field(None, ge=-(2**63), le=2**63 - 1)

    @model_validator(mode="after")
    def _one_shape(self) -> RunSettings:
        if self.preset is not None and self.rounds is not None:
            raise ValueError("give either preset or rounds, not both")
        return self

    def is_empty(self) -> bool:
        return not self.model_fields_set


_KEYS = frozenset(RunSettings.model_fields)


def _message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err.get("loc", ())) or "settings"
        parts.append(f"configurable.{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts)


def resolve_settings(
    base: PaCoReConfig,
    configurable: Mapping[str, Any] | None,
    *,
    limits: RequestLimits | None = None,
    compactors: CompactorRegistry | None = None,
) -> tuple[PaCoReConfig, str | None]:
    """The run's config (``base`` with the given settings applied) and compactor name.

    Returns ``base`` itself when no setting is given (the common, cheap case).
    The rounds and ``max_tokens`` a run asks for are checked against
    ``limits`` and its compactor name against ``compactors`` (default: the
    built-ins only); the graph's own ``base`` is the deployment's and is not
    re-checked. Raises :class:`SettingsError` naming the field of a bad value.
    """
    given = {k: v for k, v in (configurable or {}).items() if k in _KEYS and v is not None}
    if not given:
        return base, None
    try:
        settings = RunSettings.model_validate(given)
        updates: dict[str, Any] = {}
        if settings.preset is not None:
            updates["rounds"] = PRESETS[settings.preset]
        if settings.rounds is not None:
            updates["rounds"] = settings.rounds
        sampling = {
            k: getattr(settings, k)
            for k in ("temperature", "top_p", "max_tokens", "seed")
            if getattr(settings, k) is not None
        }
        if sampling:
            updates["sampling"] = base.sampling.model_copy(update=sampling)
        config = PaCoReConfig.model_validate({**base.model_dump(), **updates})
    except ValidationError as exc:
        raise SettingsError(_message(exc)) from None
    try:
        (limits or RequestLimits()).check(
            rounds=config.rounds if "rounds" in updates else None,
            max_tokens=settings.max_tokens,
        )
    except RequestLimitError as exc:
        name = "preset" if exc.field == "rounds" and settings.preset is not None else exc.field
        raise SettingsError(f"configurable.{name}: {exc}") from None
    if settings.compactor is not None:
        try:
            (compactors or CompactorRegistry()).resolve(settings.compactor)
        except ValueError as exc:
            raise SettingsError(f"configurable.compactor: {exc}") from None
    return config, settings.compactor
