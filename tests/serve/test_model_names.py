"""The model names ``pacore serve`` answers to (serve/model_names): the method by name.

Expectations come from the presets and the width bound themselves, so a
preset that changes cannot leave this test asserting yesterday's widths.
"""

from __future__ import annotations

import pytest

from pacore_graph.serve import parse_model_name
from pacore_graph.serve.model_names import LISTED_MODELS
from pacore_graph.settings.config import MAX_ROUND_WIDTH, PRESETS, PaCoReConfig


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
