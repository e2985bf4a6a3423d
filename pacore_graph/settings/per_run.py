"""Per-run settings: one graph, many run shapes, chosen by the caller of each run.

A served graph (``langgraph dev``, LangGraph Platform) is built once, but its
callers want to choose per request how hard to think. The settings a run may
give are the graph's *context* (LangGraph's ``context_schema``, read through
``Runtime``; ``langgraph dev`` publishes it as the assistant's context
schema)::

    await graph.ainvoke(state, context={"preset": "high"})
    await graph.ainvoke(state, context={"rounds": [3], "temperature": 0.6})

Inside a parent graph the context is the parent's (its own ``temperature``
is its planner's): PaCoRe then reads only the context's ``pacore`` key or
attribute (:data:`PACORE_CONTEXT_KEY`; a mapping, or PaCoRe's own
:data:`RunSettings`), whatever type the context is (a slotted dataclass, a
pydantic model, a ``TypedDict``), and nothing else of it.

The keys are the run settings marked ``per_run`` in
:data:`~pacore_graph.settings.fields.SETTINGS` (:data:`RUN_SETTINGS`); the
same keys in ``config["configurable"]`` are still read for one release, with
a ``DeprecationWarning`` (any other ``configurable`` key, such as
``thread_id``, is LangGraph's or the caller's and is ignored). They are
validated like :class:`~pacore_graph.settings.config.PaCoReConfig`, through
:meth:`~pacore_graph.settings.config.PaCoReConfig.with_settings`: a bad value
fails that run, before any model call, with a message naming the key. What is
not given keeps the value the graph was built with.

A caller is not trusted with code or with unbounded work:

- ``compactor`` resolves through the graph's
  :class:`~pacore_graph.values.compactor_registry.CompactorRegistry` (the built-ins
  and the names the deployment registered): nothing a run names is imported;
- ``rounds``/``preset`` and ``max_tokens`` go through the graph's
  :class:`~pacore_graph.settings.request_limits.RequestLimits` (16 rounds, 4096 samples
  per run, 131072 tokens per call by default).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from typing_extensions import TypedDict

from pacore_graph.errors import PaCoReError
from pacore_graph.settings.config import PRESETS, PaCoReConfig
from pacore_graph.settings.fields import SETTINGS, per_run_names
from pacore_graph.settings.request_limits import (
    DEFAULT_MAX_ROUNDS,
    RequestLimitError,
    RequestLimits,
)
from pacore_graph.settings.rounds import Round, final_round, rounds_from_items
from pacore_graph.settings.validation import describe
from pacore_graph.values.compactor_registry import CompactorRegistry

__all__ = [
    "MAX_RUN_ROUNDS",
    "PACORE_CONTEXT_KEY",
    "RUN_SETTINGS",
    "RunContext",
    "RunSettings",
    "SettingsError",
    "resolve_settings",
    "run_context_schema",
    "run_settings_given",
]

#: Rounds a per-run ``rounds`` may hold by default (``RequestLimits.max_rounds``;
#: the graph's recursion limit is set from the limits it was built with).
MAX_RUN_ROUNDS = DEFAULT_MAX_ROUNDS
#: Longest list a per-run ``rounds`` is even parsed from (any cap is lower).
_ROUNDS_PARSE_CEILING = 1024
#: The keys a run may set (its context), in the catalogue's order.
RUN_SETTINGS = per_run_names()


class SettingsError(PaCoReError, ValueError):
    """A per-run setting (``context`` or ``config["configurable"]``) is invalid.

    A ``ValueError`` too, because LangGraph catches it as one: its API server
    (``langgraph dev``, the platform) tells a client the message of a builtin
    error only (others become "An internal error occurred"), and a bad
    ``context`` is the client's to fix; its ``ModelRetryPolicy`` does not retry one.
    """


def _annotation(name: str) -> Any:
    """The type a run's value for ``name`` has: the config field's, optional."""
    row = SETTINGS[name]
    if name == "preset":
        return Literal[tuple(PRESETS)] | None
    if name == "rounds":
        return list[int | Round] | None
    if row.path is None:
        return str | None
    model: Any = PaCoReConfig
    *parents, leaf = row.path
    for part in parents:
        model = model.model_fields[part].annotation
    return model.model_fields[leaf].annotation | None


def _field(name: str, default: Any = None) -> Any:
    row = SETTINGS[name]
    extra: dict[str, Any] = {}
    if name == "rounds":
        extra["max_length"] = _ROUNDS_PARSE_CEILING
    elif row.path is None and row.choices is None:
        extra["max_length"] = 200
    return Field(default, description=row.help, **row.bounds(), **extra)


def _graph_value(base: PaCoReConfig, name: str, compactor: str | None) -> Any:
    """What a run gets for ``name`` when it does not set it: the graph's own value."""
    if name == "compactor":
        return compactor
    if name == "preset":
        return base.preset_name()
    value: Any = base
    for part in SETTINGS[name].path or ():
        value = getattr(value, part)
    return list(value) if isinstance(value, tuple) else value


class _RunSettingsBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    @field_validator("rounds", mode="before", check_fields=False)
    @classmethod
    def _rounds(cls, value: Any) -> Any:
        """Widths and rounds (their JSON too), each checked with a message naming its place."""
        if isinstance(value, list | tuple) and len(value) <= _ROUNDS_PARSE_CEILING:
            return list(rounds_from_items(value)) if value else value
        return value

    @field_validator("final", mode="before", check_fields=False)
    @classmethod
    def _final(cls, value: Any) -> Any:
        """The answer round: a round of k=1 (``k`` may be left out)."""
        return final_round(value)

    @model_validator(mode="after")
    def _one_shape(self) -> Any:
        if getattr(self, "preset", None) is not None and getattr(self, "rounds", None) is not None:
            raise ValueError("give either preset or rounds, not both")
        return self


_FIELDS: dict[str, Any] = {name: (_annotation(name), _field(name)) for name in RUN_SETTINGS}

#: The validator of a run's settings, generated from the catalogue (all optional).
RunSettings = create_model("RunSettings", __base__=_RunSettingsBase, **_FIELDS)
RunSettings.__doc__ = "The settings a PaCoRe graph reads per run (all optional)."

# The functional TypedDict form, with keys known only at import time.
_typed_dict: Any = TypedDict


def run_context_schema(
    base: PaCoReConfig | None = None,
    compactor: str | None = None,
    limits: RequestLimits | None = None,
) -> Any:
    """The graph's ``context_schema``: the per-run keys with types, bounds, help and defaults.

    A ``TypedDict``, so LangGraph passes a run's context through as given and
    the graph validates it (a bad value fails the run naming the key, not
    inside LangGraph's coercion), while ``langgraph dev`` still publishes it
    as the assistant's context schema. The defaults shown are the graph's
    own values (``base``, ``compactor``): what a run gets by not asking. The
    graph's ``limits`` are bounds too: ``rounds`` holds at most ``max_rounds``
    widths of at least 1, ``max_tokens`` is at most ``max_tokens_cap``.
    """
    base = base if base is not None else PaCoReConfig()
    limits = limits if limits is not None else RequestLimits()
    fields = {
        name: Annotated[_annotation(name), _field(name, _graph_value(base, name, compactor))]
        for name in RUN_SETTINGS
    }
    if "rounds" in fields:
        fields["rounds"] = Annotated[
            list[Annotated[int, Field(ge=1)] | Round] | None,
            _field("rounds", _graph_value(base, "rounds", compactor)),
            Field(max_length=limits.max_rounds),
        ]
    if "max_tokens" in fields:
        capped = fields["max_tokens"]
        fields["max_tokens"] = Annotated[capped, Field(le=limits.max_tokens_cap)]
    schema = _typed_dict("RunContext", fields, total=False)
    schema.__doc__ = "Per-run settings of a PaCoRe graph (LangGraph context); all optional."
    return schema


#: The context schema of a graph built with the default configuration.
RunContext: Any = run_context_schema(compactor=SETTINGS["compactor"].default)


#: The key (or attribute) of a parent graph's context under which PaCoRe's own settings are.
PACORE_CONTEXT_KEY = "pacore"


def _settings_in(context: Any) -> dict[str, Any]:
    """The run settings ``context`` holds: a mapping's keys, else its attributes.

    Any context type: a mapping (a ``TypedDict``), a pydantic model, a
    dataclass (slotted ones too), any object; only the run settings' names
    are read, and ``None`` values are "not given".
    """
    if context is None:
        return {}
    if isinstance(context, Mapping):
        return {k: v for k, v in context.items() if k in RUN_SETTINGS and v is not None}
    found = {name: getattr(context, name, None) for name in RUN_SETTINGS}
    return {k: v for k, v in found.items() if v is not None}


def _pacore_part(context: Any) -> Any:
    """The context's ``pacore`` key or attribute (PaCoRe's own settings in a parent's context)."""
    if context is None:
        return None
    if isinstance(context, Mapping):
        return context.get(PACORE_CONTEXT_KEY)
    return getattr(context, PACORE_CONTEXT_KEY, None)


def run_settings_given(
    context: Any, configurable: Mapping[str, Any] | None, *, nested: bool = False
) -> tuple[dict[str, Any], str]:
    """The run settings a run gave and where (``context``, ``context.pacore`` or the
    deprecated ``configurable``).

    PaCoRe's settings are the context's ``pacore`` key or attribute when it
    has one (a mapping, or PaCoRe's own context type). Otherwise, a graph
    run on its own (``nested`` false) reads the context itself, as its
    context schema says; one ``nested`` in a parent graph reads nothing
    else: the parent's context is the parent's (its ``temperature`` is its
    planner's, not PaCoRe's). Keys in ``configurable`` are honoured (context
    wins) with a ``DeprecationWarning``, for a graph run on its own only.
    """
    own = _pacore_part(context)
    if own is not None:
        return _settings_in(own), f"context.{PACORE_CONTEXT_KEY}"
    if nested:
        return {}, "context"
    fresh = _settings_in(context)
    # A server may mirror the context into configurable (langgraph-api does): only
    # keys the context does not carry are the caller's old way of passing them.
    legacy = {
        k: v
        for k, v in (configurable or {}).items()
        if k in RUN_SETTINGS and v is not None and k not in fresh
    }
    if not legacy:
        return fresh, "context"
    warnings.warn(
        "run settings in config['configurable'] are deprecated and will be removed in "
        "pacore-graph 0.3: pass them as context (ainvoke(..., context={...})): "
        f"{sorted(legacy)}",
        DeprecationWarning,
        stacklevel=3,
    )
    return {**legacy, **fresh}, "configurable"


def resolve_settings(
    base: PaCoReConfig,
    given: Mapping[str, Any] | None,
    *,
    limits: RequestLimits | None = None,
    compactors: CompactorRegistry | None = None,
    source: str = "context",
) -> tuple[PaCoReConfig, str | None]:
    """The run's config (``base`` with the given settings applied) and compactor name.

    Returns ``base`` itself when no setting is given (the common, cheap case).
    The rounds and ``max_tokens`` a run asks for are checked against
    ``limits`` and its compactor name against ``compactors`` (default: the
    built-ins only); the graph's own ``base`` is the deployment's and is not
    re-checked. Raises :class:`SettingsError` naming ``source.key`` of a bad
    value.
    """
    given = {k: v for k, v in (given or {}).items() if k in RUN_SETTINGS and v is not None}
    if not given:
        return base, None

    def label(name: str) -> str:
        return f"{source}.{name}"

    try:
        settings = RunSettings.model_validate(given)
        asked = settings.model_dump(exclude_none=True)
        compactor = asked.pop("compactor", None)
        config = base.with_settings(asked)
    except ValidationError as exc:
        raise SettingsError(describe(exc, label=label)) from None
    try:
        (limits or RequestLimits()).check(
            rounds=config.rounds if {"rounds", "preset"} & set(asked) else None,
            max_tokens=asked.get("max_tokens"),
            final=config.final if "final" in asked else None,
        )
    except RequestLimitError as exc:
        name = "preset" if exc.field == "rounds" and "preset" in asked else exc.field
        raise SettingsError(f"{label(name)}: {exc}") from None
    if compactor is not None:
        try:
            (compactors or CompactorRegistry()).resolve(compactor)
        except ValueError as exc:
            raise SettingsError(f"{label('compactor')}: {exc}") from None
    return config, compactor
