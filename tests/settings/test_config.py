"""Configuration validates at build time with messages that name the field and range."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.settings.config import MAX_ROUND_WIDTH, PRESETS, ModelRetryPolicy, SamplingParams
from pacore_graph.testing.fake_client import FakeChatClient


def test_presets_are_the_papers_and_add_the_final_round() -> None:
    assert PRESETS == {"low": (4,), "medium": (16,), "high": (32, 4)}
    assert PaCoReConfig.from_preset("low").schedule == (4, 1)
    assert PaCoReConfig.from_preset("medium").schedule == (16, 1)
    assert PaCoReConfig.from_preset("high").schedule == (32, 4, 1)
    assert PaCoReConfig.from_preset("high").preset_name() == "high"
    assert PaCoReConfig(rounds=[8, 2]).preset_name() is None


def test_sampling_defaults_are_the_public_pipelines() -> None:
    s = SamplingParams()
    assert (s.temperature, s.top_p, s.max_tokens) == (1.0, 1.0, None)
    assert s.request_fields() == {"temperature": 1.0, "top_p": 1.0}
    assert SamplingParams(max_tokens=7).request_fields()["max_tokens"] == 7


@pytest.mark.parametrize(
    ("rounds", "needle"),
    [
        ([], "at least one round"),
        ([0], "rounds[0] = 0"),
        ([4, -1], "rounds[1] = -1"),
        ([MAX_ROUND_WIDTH + 1], f"[1, {MAX_ROUND_WIDTH}]"),
        ([2.5], "must be an integer"),
        ([True], "must be an integer"),
        ("4", "not a string"),
    ],
)
def test_invalid_k_vectors_name_the_field_and_range(rounds: object, needle: str) -> None:
    with pytest.raises(ValidationError) as info:
        PaCoReConfig(rounds=rounds)  # type: ignore[arg-type]
    assert needle in str(info.value)
    assert "rounds" in str(info.value)


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("temperature", -0.1, "greater than or equal to 0"),
        ("temperature", 2.5, "less than or equal to 2"),
        ("top_p", 0.0, "greater than 0"),
        ("max_tokens", 0, "greater than or equal to 1"),
        ("timeout", 0, "greater than 0"),
    ],
)
def test_invalid_sampling_is_rejected(field: str, value: float, needle: str) -> None:
    with pytest.raises(ValidationError) as info:
        SamplingParams(**{field: value})
    assert field in str(info.value) and needle in str(info.value)


def test_unknown_preset_and_unknown_field() -> None:
    with pytest.raises(ValueError, match="low, medium, high"):
        PaCoReConfig.from_preset("extreme")
    with pytest.raises(ValidationError, match="max_concurency"):
        PaCoReConfig(max_concurency=4)  # type: ignore[call-arg]


def test_builder_validates_a_dict_config_before_running() -> None:
    with pytest.raises(ValidationError, match="rounds"):
        build_pacore_graph(FakeChatClient(), config={"rounds": [3, 0]})
    with pytest.raises(ValidationError, match="max_concurrency"):
        build_pacore_graph(FakeChatClient(), config={"max_concurrency": 0})


def test_retry_backoff_grows_and_is_capped() -> None:
    policy = ModelRetryPolicy(initial_backoff=0.5, multiplier=2, max_backoff=3)
    assert [policy.backoff(a) for a in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]


def test_config_is_frozen() -> None:
    cfg = PaCoReConfig()
    with pytest.raises(ValidationError):
        cfg.rounds = (1,)  # type: ignore[misc]


def test_the_methods_settings_are_off_or_the_papers_by_default() -> None:
    cfg = PaCoReConfig()
    assert (cfg.reference_filter, cfg.consensus_weight) == (None, "count")
    assert (cfg.rsa_final, cfg.deepconf_keep, cfg.deepconf_window) == ("majority", None, 2048)


def test_a_reference_filter_is_checked_when_the_config_is_built_and_kept_canonical() -> None:
    assert PaCoReConfig(reference_filter="confidence:.50").reference_filter == "confidence:0.5"
    assert PaCoReConfig(reference_filter="confidence:0.5,64").reference_filter == (
        "confidence:0.5,64"
    )
    for bad, needle in (
        ("confidence:0", "(0, 1]"),
        ("confidence:x", "not a number"),
        ("foo:1", "confidence:F"),
    ):
        with pytest.raises(ValidationError) as info:
            PaCoReConfig(reference_filter=bad)
        assert info.value.errors()[0]["loc"] == ("reference_filter",)
        assert needle in str(info.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("consensus_weight", "loudest"),
        ("rsa_final", "best"),
        ("deepconf_keep", 0.0),
        ("deepconf_keep", 1.5),
        ("deepconf_window", 0),
    ],
)
def test_bad_method_settings_are_refused_by_their_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        PaCoReConfig(**{field: value})  # type: ignore[arg-type]
    assert info.value.errors()[0]["loc"] == (field,)
