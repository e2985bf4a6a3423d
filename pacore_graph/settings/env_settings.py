"""One settings model for the model options: flags, ``PACORE_*`` variables, defaults.

:class:`PaCoReSettings` is a pydantic-settings model with one field per row of
:mod:`pacore_graph.settings.options` (the table the parser is built from). A value
comes from, in order of precedence:

1. the command-line flag (``--max-tokens 99``),
2. the environment variable ``PACORE_<NAME>`` (``PACORE_MAX_TOKENS=99``),
3. the field's default.

The CLI resolves its options through :func:`load_settings` when a command
runs (the parser itself never imports pydantic), and ``graphs/pacore.py``
builds the served graph's configuration through the same model, so
``PACORE_MODEL`` means the same thing to ``pacore run`` and ``langgraph dev``.
List values (``PACORE_BASE_URL``, ``PACORE_ROUNDS``) are comma-separated in
the environment.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.fields import SETTINGS
from pacore_graph.settings.grammar import split_widths
from pacore_graph.settings.options import (
    EMBEDDED_MAX_CONCURRENCY,
    EMBEDDED_MAX_TOKENS,
    ENV_PREFIX,
    env_name,
)
from pacore_graph.settings.presets import PRESETS
from pacore_graph.settings.request_limits import (
    DEFAULT_MAX_ROUNDS,
    DEFAULT_MAX_SAMPLES_PER_REQUEST,
    DEFAULT_MAX_TOKENS_CAP,
    LIMIT_CEILING,
    MAX_ROUNDS_CEILING,
    RequestLimitError,
    RequestLimits,
)
from pacore_graph.settings.validation import describe

__all__ = ["PaCoReSettings", "format_settings_error", "load_settings"]

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


class PaCoReSettings(BaseSettings):
    """The model options: flag > ``PACORE_*`` variable > default (see the module docstring).

    Field names are the flags' ``dest`` names; help texts and the defaults the
    help states live in :mod:`pacore_graph.settings.options`.
    """

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    preset: Literal["low", "medium", "high"] | None = None
    rounds: Annotated[list[int] | None, NoDecode] = None
    base_url: Annotated[list[str] | None, NoDecode] = None
    model: str | None = None
    api_key: str | None = None
    session_header: str = "x-session-id"
    compactor: str = "conclusion"
    max_concurrency: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    timeout: float | None = None
    seed: int | None = None
    logprobs: bool = False
    token_ids: bool = False
    shuffle_seed: int | None = None
    reference_order: Literal["public", "compacted"] | None = None
    reference_filter: str | None = None  # checked by PaCoReConfig (the one parser of its form)
    consensus_weight: Literal["count", "confidence"] | None = None
    rsa_final: Literal["majority", "aggregate"] | None = None
    deepconf_keep: float | None = None
    deepconf_window: int | None = None
    retries: int | None = None
    call_deadline: float | None = Field(None, gt=0)
    max_rounds: int = Field(DEFAULT_MAX_ROUNDS, ge=1, le=MAX_ROUNDS_CEILING)
    max_samples_per_request: int = Field(DEFAULT_MAX_SAMPLES_PER_REQUEST, ge=2, le=LIMIT_CEILING)
    max_tokens_cap: int = Field(DEFAULT_MAX_TOKENS_CAP, ge=1, le=LIMIT_CEILING)
    client: Literal["direct", "langchain"] = "direct"
    no_batch: bool = False
    trace: str | None = None
    trace_project: str = Field("pacore", min_length=1, max_length=200)
    trace_content: bool = False
    no_progress: bool = False

    @field_validator("base_url", mode="before")
    @classmethod
    def _urls(cls, value: Any) -> Any:
        return _split(value) or None

    @field_validator("rounds", mode="before")
    @classmethod
    def _rounds(cls, value: Any) -> Any:
        if isinstance(value, str):
            return split_widths(value)
        return value

    @field_validator("trace")
    @classmethod
    def _trace(cls, value: str | None) -> str | None:
        from pacore_graph.otel.exporters import TRACE_KINDS

        if value is not None and value not in TRACE_KINDS:
            raise ValueError(f"must be one of {', '.join(TRACE_KINDS)}")
        return value

    @model_validator(mode="after")
    def _within_limits(self) -> PaCoReSettings:
        """The run these settings describe must fit the per-request caps (one validator)."""
        try:
            self.limits().check(rounds=self.round_widths(), max_tokens=self.max_tokens)
        except RequestLimitError as exc:
            flag = "--rounds" if exc.field == "rounds" else "--max-tokens"
            raise ValueError(f"{flag} ({env_name(exc.field)}): {exc}") from None
        return self

    def limits(self) -> RequestLimits:
        """The per-request caps these settings give (``--max-rounds``, ...)."""
        return RequestLimits(
            max_rounds=self.max_rounds,
            max_samples_per_request=self.max_samples_per_request,
            max_tokens_cap=self.max_tokens_cap,
        )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Flags (init values), then ``PACORE_*`` variables; no dotenv or secret files."""
        del env_settings, dotenv_settings, file_secret_settings
        return (init_settings, _MappingEnvSource(settings_cls))

    def round_widths(self) -> list[int]:
        """``rounds`` if given, else the preset's widths (``low`` when neither is)."""
        return list(self.rounds) if self.rounds else list(PRESETS[self.preset or "low"])

    def to_config(
        self,
        *,
        embedded: bool = False,
        default_max_concurrency: int | None = None,
        **extra: Any,
    ) -> PaCoReConfig:
        """The run configuration these settings describe (validated by ``PaCoReConfig``).

        ``embedded`` applies the embedded model's defaults (a token cap and
        little concurrency) where no value was given; ``extra`` are further
        ``PaCoReConfig`` fields (round control) given by the caller.
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
        if self.max_concurrency is None:
            if embedded:
                given["max_concurrency"] = EMBEDDED_MAX_CONCURRENCY
            elif default_max_concurrency is not None:
                given["max_concurrency"] = default_max_concurrency
        config = PaCoReConfig().with_settings(given)
        fields: dict[str, Any] = dict(extra)
        if self.token_ids:
            extra_body = {**config.sampling.extra_body, "return_token_ids": True}
            fields["sampling"] = config.sampling.model_copy(update={"extra_body": extra_body})
        if self.no_batch:
            fields["batch_samples"] = False
        return config.model_validate({**config.model_dump(), **fields}) if fields else config


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


def format_settings_error(exc: ValidationError) -> str:
    """One line naming each bad setting by its variable (flags are checked by the parser)."""
    return describe(exc, label=env_name, prefix="invalid settings: ")
