"""One settings model for every setting: flags, ``PACORE_*`` variables, defaults.

:class:`PaCoReSettings` is a pydantic-settings model generated with one field
per row of :data:`~pacore_graph.settings.fields.SETTINGS` (the catalogue the
flags are built from too). A value comes from, in order of precedence:

1. the command-line flag (``--max-tokens 99``),
2. the environment variable ``PACORE_<NAME>`` (``PACORE_MAX_TOKENS=99``),
3. the field's default.

The CLI resolves its options through :func:`load_settings` when a command
runs (the parser itself never imports pydantic), and ``graphs/pacore.py``
builds the served graph's configuration through the same model, so
``PACORE_MODEL`` means the same thing to ``pacore run`` and ``langgraph dev``.
List values (``PACORE_BASE_URL``, ``PACORE_ROUNDS``) are comma-separated in
the environment; ``PACORE_FINAL`` (the answer round's own sampling) is JSON.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias

from pydantic import (
    Field,
    PrivateAttr,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.fields import (
    EMBEDDED_MAX_CONCURRENCY,
    EMBEDDED_MAX_TOKENS,
    ENV_PREFIX,
    LIMIT_NAMES,
    SERVE_ENV_PREFIX,
    SERVE_SETTINGS,
    SETTINGS,
    BoundError,
    Setting,
    env_name,
)
from pacore_graph.settings.grammar import split_widths
from pacore_graph.settings.presets import PRESETS
from pacore_graph.settings.request_limits import RequestLimits
from pacore_graph.settings.validation import describe

__all__ = [
    "PaCoReServeSettings",
    "PaCoReSettings",
    "format_settings_error",
    "load_serve_settings",
    "load_settings",
]

#: The environment a :func:`load_settings` call reads (``None``: ``os.environ``).
#: A context variable, not a module global, so concurrent calls cannot see
#: each other's mapping.
_ENVIRON: ContextVar[Mapping[str, str] | None] = ContextVar("pacore_environ", default=None)


class _MappingEnvSource(EnvSettingsSource):
    """The standard environment source, reading the mapping given to :func:`load_settings`."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        environ = _ENVIRON.get()
        if environ is not None:
            self.env_vars = {k.lower(): v for k, v in environ.items()}


def _split(value: Any) -> Any:
    """A comma-separated environment value -> its items (lists from flags pass through)."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def _annotation(row: Setting) -> Any:
    """The type the settings model parses a row's value into (text from a variable or flag).

    Only the type: the bounds of a config setting are the config's to check
    (:func:`~pacore_graph.settings.fields.config_field`), a cap's
    :class:`RequestLimits`'s, so no value is validated twice.
    """
    if row.kind is bool:
        return bool
    if row.name == "rounds":
        return Annotated[list[int] | None, NoDecode]
    if row.repeatable:
        return Annotated[list[str] | None, NoDecode]
    kind: Any = Literal[row.choices] if row.choices is not None else row.kind
    if row.kind is dict:
        kind = dict[str, Any]
    optional = row.path is not None or row.default is None
    return kind | None if optional else kind


def _field(row: Setting) -> Any:
    """The field: ``None`` (not given: the config's own default) for a config setting,
    else the row's default; the length bounds of a setting no other model checks."""
    if row.kind is bool:
        return Field(False, description=row.help)
    default = None if row.path is not None else row.default
    return Field(
        default, description=row.help, min_length=row.min_length, max_length=row.max_length
    )


class _FlagsThenEnv(BaseSettings):
    """What both settings models share: flags, then the environment, nothing else.

    A value comes from the flags (init values) first, then from the model's
    ``env_prefix`` variables (``PACORE_*`` or ``PACORE_SERVE_*``) in the
    mapping given to :func:`load_settings` (``os.environ`` by default); no
    dotenv or secret files are read. Unknown names are ignored: each
    subclass sets only its ``env_prefix``.
    """

    model_config = SettingsConfigDict(extra="ignore")

    if TYPE_CHECKING:  # the fields are generated from the rows; each is read by its name

        def __getattr__(self, name: str) -> Any: ...

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags (init values), then the prefixed variables; no dotenv or secret files."""
        del env_settings, dotenv_settings, file_secret_settings
        return (init_settings, _MappingEnvSource(settings_cls))


class _SettingsBase(_FlagsThenEnv):
    """What the generated :class:`PaCoReSettings` does beyond holding the rows' values."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX)

    _limits: RequestLimits | None = PrivateAttr(default=None)
    """The caps as validated (built once: :meth:`limits` hands out this one)."""

    @field_validator("base_url", mode="before", check_fields=False)
    @classmethod
    def _urls(cls, value: Any) -> Any:
        return _split(value) or None

    @field_validator("rounds", mode="before", check_fields=False)
    @classmethod
    def _rounds(cls, value: Any) -> Any:
        if isinstance(value, str):
            return split_widths(value)
        return value

    @model_validator(mode="after")
    def _within_limits(self) -> Any:
        """The caps are in bounds and the run these settings describe fits them (one check)."""
        try:
            limits = self.limits()
        except BoundError as exc:
            raise ValueError(f"{env_name(exc.name)}: {exc}") from None
        limits.check_settings(rounds=self.round_widths(), max_tokens=self.max_tokens)
        self._limits = limits
        return self

    def limits(self) -> RequestLimits:
        """The per-request caps these settings give (``--max-rounds``, ...), built once."""
        if self._limits is None:
            self._limits = RequestLimits(**{name: getattr(self, name) for name in LIMIT_NAMES})
        return self._limits

    def round_widths(self) -> list[int]:
        """``rounds`` if given, else the preset's widths (``low`` when neither is)."""
        if self.rounds:
            return list(self.rounds)
        return list(PRESETS[self.preset] if self.preset else SETTINGS["rounds"].default)

    def to_config(self, *, embedded: bool = False) -> PaCoReConfig:
        """The run configuration these settings describe (validated by ``PaCoReConfig``).

        ``embedded`` applies the embedded model's defaults (a token cap and
        little concurrency) where no value was given. The one route from
        settings to a config: every row with a ``path`` that was given is
        applied through :meth:`PaCoReConfig.with_settings`.
        """
        given: dict[str, Any] = {
            name: getattr(self, name)
            for name, row in SETTINGS.items()
            if row.path is not None and getattr(self, name, None) is not None
        }
        given["rounds"] = self.round_widths()
        if not self.logprobs:
            given.pop("logprobs", None)  # a flag not given: the config's default
        if embedded and self.max_tokens is None:
            given["max_tokens"] = EMBEDDED_MAX_TOKENS
        if embedded and self.max_concurrency is None:
            given["max_concurrency"] = EMBEDDED_MAX_CONCURRENCY
        config = PaCoReConfig().with_settings(given)
        fields: dict[str, Any] = {}
        if self.token_ids:
            extra_body = {**config.sampling.extra_body, "return_token_ids": True}
            fields["sampling"] = config.sampling.model_copy(update={"extra_body": extra_body})
        if self.no_batch:
            fields["batch_samples"] = False
        return config.model_validate({**config.model_dump(), **fields}) if fields else config


#: The settings model: one field per row of the catalogue, named as its flag's ``dest``,
#: read from its ``PACORE_*`` variable (generated, so it cannot drift from the rows).
PaCoReSettings: TypeAlias = _SettingsBase
if not TYPE_CHECKING:
    PaCoReSettings = create_model(
        "PaCoReSettings",
        __base__=_SettingsBase,
        __module__=__name__,
        **{name: (_annotation(row), _field(row)) for name, row in SETTINGS.items()},
    )
    PaCoReSettings.__doc__ = (
        "The settings of a run: flag > ``PACORE_*`` variable > default, one field per row of "
        ":data:`~pacore_graph.settings.fields.SETTINGS` (see the module docstring)."
    )


class _ServeBase(_FlagsThenEnv):
    """What the generated :class:`PaCoReServeSettings` does beyond holding the serve rows."""

    model_config = SettingsConfigDict(env_prefix=SERVE_ENV_PREFIX)

    @field_validator("upstream", mode="before", check_fields=False)
    @classmethod
    def _urls(cls, value: Any) -> Any:
        return _split(value) or None


#: ``pacore serve``'s own settings: flag > ``PACORE_SERVE_*`` variable > default, one
#: field per row of :data:`~pacore_graph.settings.fields.SERVE_SETTINGS` (types only:
#: the bounds are :class:`~pacore_graph.serve.settings.ServeSettings`'s to check).
PaCoReServeSettings: TypeAlias = _ServeBase
if not TYPE_CHECKING:
    PaCoReServeSettings = create_model(
        "PaCoReServeSettings",
        __base__=_ServeBase,
        __module__=__name__,
        **{
            name: (_annotation(row), Field(row.default, description=row.help))
            for name, row in SERVE_SETTINGS.items()
        },
    )


@contextmanager
def _environ(env: Mapping[str, str] | None) -> Iterator[None]:
    token = _ENVIRON.set(env)
    try:
        yield
    finally:
        _ENVIRON.reset(token)


def load_settings(
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    *,
    only: Iterable[str] | None = None,
) -> PaCoReSettings:
    """Resolve the settings: ``flags`` (``None`` values: not given) > ``env`` > defaults.

    ``env`` defaults to ``os.environ``. A preset or rounds given as a flag
    hides the other one's variable: ``--preset high`` wins over
    ``PACORE_ROUNDS``. With ``only``, the other fields keep their defaults
    whatever the environment says (a command reads only the variables of the
    options it lists). Raises ``pydantic.ValidationError`` on a bad value
    (:func:`format_settings_error` makes it one line).
    """
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    if only is not None:
        kept = set(only)
        for name, field in PaCoReSettings.model_fields.items():
            if name not in kept:
                given[name] = field.default
    if "preset" in given or "rounds" in given:
        given.setdefault("preset", None)
        given.setdefault("rounds", None)
    with _environ(env if env is not None else os.environ):
        return PaCoReSettings(**given)


def load_serve_settings(
    flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
) -> PaCoReServeSettings:
    """``pacore serve``'s own settings: ``flags`` (``None``: not given) > ``env`` > defaults.

    Raises ``pydantic.ValidationError`` (:func:`format_settings_error` names
    the ``PACORE_SERVE_*`` variable).
    """
    given = {k: v for k, v in (flags or {}).items() if v is not None}
    with _environ(env if env is not None else os.environ):
        return PaCoReServeSettings(**given)


def format_settings_error(exc: ValidationError) -> str:
    """One line naming each bad setting by its variable (flags are checked by the parser)."""
    return describe(exc, label=_variable, prefix="invalid settings: ")


def _variable(name: str) -> str:
    row = SETTINGS.get(name)
    if row is None and name in SERVE_SETTINGS:
        row = SERVE_SETTINGS[name]
    return row.env if row is not None else env_name(name)
