"""The one grammar of round widths, model names, served model names and method specs.

Expectations come from the presets and the width bound themselves, so a
preset that changes cannot leave this test asserting yesterday's widths.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from pacore_graph.serve import parse_model_name
from pacore_graph.settings.config import MAX_ROUND_WIDTH, PRESETS, PaCoReConfig
from pacore_graph.settings.grammar import (
    LISTED_MODELS,
    METHOD_DEFAULTS,
    SERVED_FAMILIES,
    SERVED_MODELS,
    is_served_name,
    parse_method,
    parse_served_model,
)


@pytest.mark.parametrize("preset", ["low", "medium", "high"])
def test_listed_names_are_the_presets(preset: str) -> None:
    name = f"pacore-{preset}"
    assert name in LISTED_MODELS
    assert parse_model_name(name) == PRESETS[preset]
    # the same run as the preset itself
    assert (
        PaCoReConfig(rounds=parse_model_name(name)).schedule
        == PaCoReConfig(rounds=PRESETS[preset]).schedule
    )


@pytest.mark.parametrize("widths", [(8, 2), (1,), (MAX_ROUND_WIDTH, 1)])
def test_any_widths_by_name(widths: tuple[int, ...]) -> None:
    assert parse_model_name("pacore:" + ",".join(map(str, widths))) == widths
    assert parse_model_name("pacore: " + " , ".join(map(str, widths))) == widths


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("gpt-4", "unknown model"),
        ("pacore", "unknown model"),
        ("pacore-ultra", "unknown model"),
        ("pacore:", "round widths"),
        ("pacore:0", "round widths"),
        ("pacore:8,x", "round widths"),
        ("pacore:-1", "round widths"),
        (f"pacore:{MAX_ROUND_WIDTH + 1}", f"[1, {MAX_ROUND_WIDTH}]"),
    ],
)
def test_names_that_ask_for_nothing_are_refused_with_the_choices(bad: str, says: str) -> None:
    with pytest.raises(ValueError, match=r"pacore:8,2") as caught:  # an example to copy
        parse_model_name(bad)
    assert says in str(caught.value)


# -- one grammar, every surface --------------------------------------------------------------


def _surfaces() -> dict[str, Any]:
    """Each place a person types round widths, as a function of the text ``8,2``."""
    from pacore_graph.eval.methods import parse_method
    from pacore_graph.settings.env_settings import load_settings
    from pacore_graph.settings.grammar import parse_widths, rounds_from

    return {
        "--rounds/PACORE_ROUNDS": lambda t: tuple(
            PaCoReConfig(rounds=load_settings(env={"PACORE_ROUNDS": t}).round_widths()).rounds
        ),
        "serve 'rounds'": lambda t: rounds_from(t),
        "model name": lambda t: parse_model_name(f"pacore:{t}"),
        "method spec": lambda t: parse_method(f"pacore:{t}").rounds,
        "grammar": lambda t: parse_widths(t),
    }


@pytest.mark.parametrize("text", ["8,2", "8+2", " 3 ", f"{MAX_ROUND_WIDTH},1"])
def test_every_surface_reads_the_same_widths(text: str) -> None:
    expected = tuple(int(x) for x in text.replace("+", ",").split(","))
    got = {name: parse(text) for name, parse in _surfaces().items()}
    assert got == dict.fromkeys(got, expected)


@pytest.mark.parametrize("text", ["0", f"{MAX_ROUND_WIDTH + 1}", "4,0", "x", "-1"])
def test_every_surface_refuses_the_same_widths(text: str) -> None:
    for parse in _surfaces().values():
        with pytest.raises(ValueError):  # pydantic's ValidationError is a ValueError
            parse(text)


def test_a_width_error_names_the_bound() -> None:
    from pacore_graph.settings.grammar import check_widths, width

    with pytest.raises(
        ValueError, match=rf"rounds\[1\] = 0: K must be in \[1, {MAX_ROUND_WIDTH}\]"
    ):
        check_widths([4, 0])
    assert width(str(MAX_ROUND_WIDTH)) == MAX_ROUND_WIDTH


# -- served model names: every method a server runs, one function ----------------------------


@pytest.mark.parametrize("name", [*LISTED_MODELS, "pacore:8,2", "pacore: 3 , 1", "pacore:8+2"])
def test_pacore_names_serve_as_before(name: str) -> None:
    spec = parse_served_model(name)
    assert (spec.family, spec.text) == ("pacore", name)
    assert spec.rounds == parse_model_name(name)


@pytest.mark.parametrize(
    ("name", "family", "rounds", "k", "calls"),
    [
        ("rsa:4,2,2", "rsa", (4, 4), 2, 8),
        ("rsa:16,4,10", "rsa", (16,) * 10, 4, 160),
        ("deepconf:8", "deepconf", (8,), 8, 8),
        ("deepconf-online:4", "deepconf-online", (4,), 4, 4),
        ("majority:3", "majority", (3,), 3, 3),
        ("aggagent:4", "aggagent", (4,), 4, 5),  # the agent's step is one more trajectory
    ],
)
def test_method_names_are_method_specs(
    name: str, family: str, rounds: tuple[int, ...], k: int, calls: int
) -> None:
    spec = parse_served_model(name)
    assert spec == parse_method(name)
    assert (spec.family, spec.rounds, spec.k, spec.expected_trajectories) == (
        family,
        rounds,
        k,
        calls,
    )


def test_a_bare_method_name_is_its_default_spec() -> None:
    assert METHOD_DEFAULTS["rsa"] == "rsa:16,4,10"  # RSA's public defaults: N 16, K 4, T 10
    for bare, default in METHOD_DEFAULTS.items():
        spec = parse_served_model(bare)
        assert spec == parse_method(default)
        assert spec.text == default  # so both names share one compiled graph
    assert METHOD_DEFAULTS["deepconf"] == "deepconf:16"
    assert METHOD_DEFAULTS["deepconf-online"] == "deepconf-online:16"
    assert METHOD_DEFAULTS["aggagent"] == "aggagent:16"


def test_the_listing_shows_each_default_beside_its_bare_name() -> None:
    assert SERVED_MODELS[: len(LISTED_MODELS)] == tuple(LISTED_MODELS)
    rest = SERVED_MODELS[len(LISTED_MODELS) :]
    assert rest == tuple(n for pair in METHOD_DEFAULTS.items() for n in pair)
    assert rest[:2] == ("rsa", "rsa:16,4,10")
    for name in SERVED_MODELS:  # every listed name runs something
        assert parse_served_model(name).family in SERVED_FAMILIES


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ("gpt-4", "unknown model"),
        ("single", "unknown model"),  # not served: a plain call is the upstream's own name
        ("refine:2", "unknown model"),
        ("pacore", "unknown model"),
        ("rsa:4,2", "rsa:N,K,T"),
        ("rsa:4,8,2", "K=8 cannot be drawn from a population of N=4"),
        ("rsa:0,1,1", f"[1, {MAX_ROUND_WIDTH}]"),
        (f"rsa:{MAX_ROUND_WIDTH + 1},1,1", f"[1, {MAX_ROUND_WIDTH}]"),
        ("deepconf:", "positive integer"),
        ("deepconf-online:1", "at least 2"),
        ("majority:x", "positive integer"),
        ("aggagent:0", f"[1, {MAX_ROUND_WIDTH}]"),
        ("aggagent:", "positive integer"),
        ("pacore:0", "round widths"),
    ],
)
def test_bad_served_names_are_refused_naming_the_forms(bad: str, says: str) -> None:
    with pytest.raises(ValueError, match=re.escape(says)) as caught:
        parse_served_model(bad)
    if says == "unknown model":
        for form in ("pacore:8,2", "rsa:N,K,T (rsa = rsa:16,4,10)", "deepconf-online:N"):
            assert form in str(caught.value)


@pytest.mark.parametrize(
    ("name", "served"),
    [
        ("pacore-low", True),
        ("rsa", True),
        ("rsa:4,2,2", True),
        ("rsa:0,1,1", True),  # refused by the server, never relayed
        ("deepconf-online:x", True),
        ("majority", True),
        ("aggagent", True),
        ("aggagent:x", True),
        ("pacore:x", True),
        ("pacore", False),
        ("single", False),
        ("gpt-4", False),
        ("rsa-large", False),
        ("my-org/rsa:v2", False),
    ],
)
def test_which_names_belong_to_the_server(name: str, served: bool) -> None:
    assert is_served_name(name) is served
