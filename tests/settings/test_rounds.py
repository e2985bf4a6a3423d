"""``Round``: a round's width with its own sampling and model, as config, context and JSON."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pacore_graph import PaCoReConfig, Round
from pacore_graph.settings.config import SamplingParams
from pacore_graph.settings.per_run import SettingsError, resolve_settings
from pacore_graph.settings.rounds import final_round, round_from, rounds_from_items, widths_of


def test_a_round_checks_its_settings_where_it_is_written() -> None:
    assert Round(4, temperature=0.2, model="small").settings == {
        "temperature": 0.2,
        "model": "small",
    }
    for bad, match in (
        (lambda: Round(0), r"Round\.k must be in \[1, 1024\]"),
        (lambda: Round(True), "must be an integer"),
        (lambda: Round(2, temperature=2.5), r"Round\.temperature must be in \[0\.0, 2\.0\]"),
        (lambda: Round(2, top_p=0), r"Round\.top_p must be in \(0\.0, 1\.0\]"),
        (lambda: Round(2, max_tokens=0), r"Round\.max_tokens must be >= 1"),
        (lambda: Round(2, max_tokens=1.5), r"Round\.max_tokens must be an integer"),
        (lambda: Round(2, model=""), r"Round\.model must be a model name"),
    ):
        with pytest.raises(ValueError, match=match):
            bad()


def test_a_round_that_sets_nothing_is_its_width() -> None:
    assert round_from(Round(4)) == 4 and round_from({"k": 3}) == 3 and round_from("5") == 5
    assert PaCoReConfig(rounds=[Round(32), Round(4)]) == PaCoReConfig.from_preset("high")
    assert PaCoReConfig(rounds=[Round(32), 4]).preset_name() == "high"


def test_rounds_mix_widths_rounds_and_json_objects() -> None:
    cfg = PaCoReConfig(
        rounds=[Round(16, temperature=1.0, model="small"), 4, {"k": 2, "top_p": 0.5}],
        final={"temperature": 0.2, "model": "large"},
    )
    assert cfg.widths == (16, 4, 2) and cfg.schedule == (16, 4, 2, 1)
    assert cfg.rounds[2] == Round(2, top_p=0.5) and cfg.final == Round(1, 0.2, model="large")
    assert cfg.has_round_settings and not PaCoReConfig(rounds=[4]).has_round_settings
    # A config round-trips through its dump (what with_settings and checkpoints do).
    assert PaCoReConfig.model_validate(cfg.model_dump()) == cfg
    assert PaCoReConfig.model_validate_json(cfg.model_dump_json()) == cfg


def test_each_round_sends_the_runs_sampling_with_its_own_settings() -> None:
    cfg = PaCoReConfig(
        rounds=[Round(4, temperature=0.9, model="small"), 2],
        final=Round(1, temperature=0.1, max_tokens=64),
        sampling=SamplingParams(temperature=0.6, top_p=0.8, seed=3),
    )
    first, second, answer = (cfg.round_sampling(i) for i in range(3))
    assert (first.temperature, first.top_p, first.model, first.seed) == (0.9, 0.8, "small", 3)
    assert second == cfg.sampling  # a plain width: the run's own
    assert (answer.temperature, answer.max_tokens, answer.model) == (0.1, 64, None)
    assert first.request_fields()["model"] == "small"
    assert "model" not in second.request_fields()
    with pytest.raises(IndexError):
        cfg.round_sampling(3)
    # A run-wide override reaches the rounds that do not set their own.
    hotter = cfg.with_settings({"temperature": 1.2})
    assert [hotter.round_sampling(i).temperature for i in range(3)] == [0.9, 1.2, 0.1]


def test_bad_rounds_and_finals_fail_naming_their_place() -> None:
    with pytest.raises(
        ValidationError, match=r"rounds\[1\]: unknown round setting\(s\) \['tempo'\]"
    ):
        PaCoReConfig(rounds=[2, {"k": 2, "tempo": 1}])
    with pytest.raises(ValidationError, match=r"rounds\[0\]: a round needs its width k"):
        PaCoReConfig(rounds=[{"model": "m"}])
    with pytest.raises(ValidationError, match="final is the answer round: its k must be 1"):
        PaCoReConfig(final=Round(2, temperature=0.1))
    assert final_round({"k": 1}) is None and final_round(None) is None
    with pytest.raises(ValueError, match="at least one round"):
        rounds_from_items([])
    assert widths_of([Round(3, model="m"), 2]) == (3, 2)


def test_a_runs_context_may_give_rounds_and_final_as_json_within_the_limits() -> None:
    base = PaCoReConfig(rounds=[4])
    cfg, _ = resolve_settings(
        base, {"rounds": [{"k": 2, "model": "small"}, 3], "final": {"temperature": 0.0}}
    )
    assert cfg.rounds == (Round(2, model="small"), 3) and cfg.final == Round(1, 0.0)
    for given, match in (
        ({"rounds": [{"k": 2, "max_tokens": 10**9}]}, r"context\.rounds: max_tokens .* cap"),
        ({"final": {"max_tokens": 10**9}}, r"context\.final: max_tokens .* cap"),
        ({"final": {"k": 2}}, r"context\.final: final is the answer round"),
        ({"rounds": [{"k": 2, "seed": 1}]}, r"context\.rounds: .*unknown round setting"),
    ):
        with pytest.raises(SettingsError, match=match):
            resolve_settings(base, given)
