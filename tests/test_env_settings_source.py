"""``PaCoReSettings`` reads ``PACORE_*`` exactly as the pydantic-settings model it replaced.

The settings model reads the environment itself (importing pydantic-settings
cost every ``pacore run`` start-up time). The reference below is that earlier
model, verbatim apart from its name: for every environment and flag set here
both must give the same values, or the same errors (field, message, input).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import ValidationError, field_validator

from pacore_graph.env_settings import _ENVIRON, PaCoReSettings, _environ, load_settings
from pacore_graph.options import ENV_PREFIX, parse_rounds

pydantic_settings = pytest.importorskip("pydantic_settings")
BaseSettings = pydantic_settings.BaseSettings
EnvSettingsSource = pydantic_settings.EnvSettingsSource
NoDecode = pydantic_settings.NoDecode
PydanticBaseSettingsSource = pydantic_settings.PydanticBaseSettingsSource
SettingsConfigDict = pydantic_settings.SettingsConfigDict


class _ReferenceEnvSource(EnvSettingsSource):  # type: ignore[misc,valid-type]
    def __init__(self, settings_cls: Any) -> None:
        super().__init__(settings_cls)
        environ = _ENVIRON.get()
        if environ is not None:
            self.env_vars = {k.lower(): v for k, v in environ.items()}


def _split(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class ReferenceSettings(BaseSettings):  # type: ignore[misc,valid-type]
    """The pydantic-settings model ``PaCoReSettings`` was until it read the environment itself."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    preset: Literal["low", "medium", "high"] | None = None
    rounds: Annotated[list[int] | None, NoDecode] = None
    base_url: Annotated[list[str] | None, NoDecode] = None
    model: str | None = None
    api_key: str | None = None
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
    retries: int | None = None
    client: Literal["direct", "langchain"] = "direct"
    no_batch: bool = False
    trace: str | None = None
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
            return parse_rounds(value)
        return value

    @field_validator("trace")
    @classmethod
    def _trace(cls, value: str | None) -> str | None:
        from pacore_graph.telemetry import TRACE_KINDS

        if value is not None and value not in TRACE_KINDS:
            raise ValueError(f"must be one of {', '.join(TRACE_KINDS)}")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: Any,
        init_settings: Any,
        env_settings: Any,
        dotenv_settings: Any,
        file_secret_settings: Any,
    ) -> tuple[Any, ...]:
        return (init_settings, _ReferenceEnvSource(settings_cls))


def _outcome(make: Any) -> Any:
    try:
        return ("ok", make().model_dump())
    except ValidationError as exc:
        return ("error", [(e["loc"], e["msg"], e["input"]) for e in exc.errors()])


def _both(flags: dict[str, Any], env: dict[str, str]) -> tuple[Any, Any]:
    with _environ(env):
        reference = _outcome(lambda: ReferenceSettings(**flags))
        ours = _outcome(lambda: PaCoReSettings(**flags))
    return ours, reference


def test_the_reference_has_the_same_fields() -> None:
    assert list(ReferenceSettings.model_fields) == list(PaCoReSettings.model_fields)


ENVIRONMENTS: list[dict[str, str]] = [
    {},
    {"PACORE_MAX_TOKENS": "99", "PACORE_MODEL": "m", "PACORE_SEED": "7"},
    {"pacore_max_tokens": "12", "Pacore_Temperature": "0.5"},  # any case
    {"PACORE_BASE_URL": "http://a:1/v1, http://b:2/v1", "PACORE_ROUNDS": "8,2"},
    {"PACORE_BASE_URL": "", "PACORE_MODEL": ""},  # empty values are values
    {"PACORE_BASE_URL": " , ", "PACORE_API_KEY": "k"},
    {"PACORE_PRESET": "high", "PACORE_REFERENCE_ORDER": "compacted"},
    {"PACORE_NO_BATCH": "1", "PACORE_LOGPROBS": "true", "PACORE_TOKEN_IDS": "off"},
    {"PACORE_NO_PROGRESS": "yes", "PACORE_TRACE_CONTENT": "0", "PACORE_TRACE": "console"},
    {"PACORE_CLIENT": "langchain", "PACORE_COMPACTOR": "budget:100", "PACORE_RETRIES": "2"},
    {"PACORE_TIMEOUT": "1e3", "PACORE_TOP_P": "0.9", "PACORE_SHUFFLE_SEED": "-1"},
    {"PACORE_MAX_CONCURRENCY": "8", "PACORE_REQUIRE_POSTGRES": "1", "OTHER": "x"},
    # bad values: the same errors, naming the same fields
    {"PACORE_TEMPERATURE": "warm", "PACORE_CLIENT": "carrier-pigeon"},
    {"PACORE_MAX_TOKENS": "lots", "PACORE_PRESET": "huge", "PACORE_TRACE": "smoke"},
    {"PACORE_LOGPROBS": "maybe", "PACORE_SEED": "1.5", "PACORE_REFERENCE_ORDER": "x"},
    {"PACORE_ROUNDS": "8,,2"},
    {"PACORE_ROUNDS": ""},
    {"PACORE_MAX_TOKENS": " 5 "},
]

FLAGS: list[dict[str, Any]] = [
    {},
    {"max_tokens": 7, "model": "flag"},
    {"base_url": ["http://c:3/v1"], "rounds": [3]},
    {"preset": None, "rounds": None, "model": None},  # pinned: hides the variables
    {"temperature": "0.25", "no_batch": True},
]


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=range(len(ENVIRONMENTS)))
@pytest.mark.parametrize("flags", FLAGS, ids=range(len(FLAGS)))
def test_the_same_values_or_errors_as_pydantic_settings(
    flags: dict[str, Any], env: dict[str, str]
) -> None:
    ours, reference = _both(flags, env)
    assert ours == reference


def test_construction_reads_os_environ_when_no_mapping_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PACORE_SEED", "4321")
    monkeypatch.setenv("pacore_model", "lower-case-name")
    settings = PaCoReSettings()
    assert settings.seed == 4321 and settings.model == "lower-case-name"
    # validation reads it too, as the BaseSettings model's did (pydantic calls __init__)
    assert PaCoReSettings.model_validate({}).seed == 4321
    assert ReferenceSettings.model_validate({}).seed == 4321
    assert load_settings({}).seed == 4321
