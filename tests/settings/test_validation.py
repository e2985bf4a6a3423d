"""settings/validation: one line per invalid config, naming each setting as its surface knows it.

The errors are real pydantic ones, raised by ``PaCoReConfig`` itself (and, for
a check across fields, by a small model with a model validator); the
expected names come from the settings catalogue, never from a copy of it.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError, model_validator

from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.fields import SETTINGS
from pacore_graph.settings.validation import describe, first_setting, setting_name


def _error(**fields: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        PaCoReConfig(**fields)  # type: ignore[arg-type]
    return caught.value


@pytest.mark.parametrize("name", [name for name, row in SETTINGS.items() if row.path is not None])
def test_every_config_path_maps_back_to_its_flat_name(name: str) -> None:
    path = SETTINGS[name].path
    assert path is not None
    assert setting_name(path) == name


def test_a_location_inside_a_list_names_the_lists_setting_and_others_stay_dotted() -> None:
    assert setting_name(("rounds", 1)) == "rounds"
    assert setting_name(("sampling", "temperature", "extra")) == "temperature"
    assert setting_name(("no_such", "field")) == "no_such.field"
    assert setting_name(()) == ""


def test_describe_names_every_bad_setting_by_its_label_on_one_line() -> None:
    exc = _error(sampling={"temperature": 9, "top_p": 7}, retry={"max_attempts": 0})
    line = describe(exc, label=lambda n: f"--{n.replace('_', '-')}", prefix="pacore: error: ")
    assert "\n" not in line
    assert line.startswith("pacore: error: --temperature: ")
    assert "; --top-p: " in line and "; --retries: " in line
    assert line.count(";") == 2


def test_the_value_error_prefix_is_dropped_and_the_default_label_is_the_flat_name() -> None:
    line = describe(_error(rounds=[4, 0]))
    assert line.startswith("rounds: rounds[1] = 0")
    assert "Value error" not in line


def test_a_check_across_fields_keeps_its_own_message() -> None:
    class Pair(BaseModel):
        low: int
        high: int

        @model_validator(mode="after")
        def ordered(self) -> Pair:
            if self.low > self.high:
                raise ValueError("low must not exceed high")
            return self

    with pytest.raises(ValidationError) as caught:
        Pair(low=2, high=1)
    assert describe(caught.value, prefix="bad: ") == "bad: low must not exceed high"
    assert first_setting(caught.value) == ("", "low must not exceed high")


def test_first_setting_is_the_first_bad_fields_flat_name_and_message() -> None:
    name, message = first_setting(_error(sampling={"top_p": 7, "max_tokens": 0}))
    assert name == "top_p"
    assert message == "Input should be less than or equal to 1"
