"""The one grammar of round widths, model names and method specs (settings/grammar).

Expectations come from the presets and the width bound themselves, so a
preset that changes cannot leave this test asserting yesterday's widths.
"""

from __future__ import annotations

from typing import Any

import pytest

from pacore_graph.serve import parse_model_name
from pacore_graph.settings.config import MAX_ROUND_WIDTH, PRESETS, PaCoReConfig
from pacore_graph.settings.grammar import LISTED_MODELS


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
