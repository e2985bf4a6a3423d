"""settings/options: the flags built from the settings catalogue, on real argparse parsers.

Expectations are read from the catalogue's rows (help, bounds, choices,
defaults), never copied: a flag drifting from its setting fails here.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from pacore_graph.settings.fields import SETTINGS
from pacore_graph.settings.options import (
    MODEL_OPTIONS,
    ROUND_CONTROL_OPTIONS,
    SHAPE_OPTIONS,
    Option,
    add_options,
    env_name,
)


def parser_with(names: list[str] | None = None, *, shape: bool = False) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="t", exit_on_error=False)
    add_options(parser, names, shape=shape)
    return parser


def test_a_flag_takes_its_help_type_and_choices_from_its_row() -> None:
    for option in MODEL_OPTIONS:
        if option.name not in SETTINGS:
            continue
        row = SETTINGS[option.name]
        assert option.help == row.help, option.name
        assert option.env == env_name(option.name) == "PACORE_" + option.name.upper()
        assert option.option_string == "--" + option.name.replace("_", "-")
        if row.kind is bool:
            assert option.flag, option.name
        elif option.choices is not None:
            assert list(option.choices) == list(row.choices or ()), option.name


def test_not_given_is_none_so_a_default_value_typed_out_can_be_told_apart() -> None:
    parser = parser_with()
    untouched = vars(parser.parse_args([]))
    assert all(untouched[o.name] is None for o in MODEL_OPTIONS)
    given = vars(parser.parse_args(["--temperature", str(SETTINGS["temperature"].default)]))
    assert given["temperature"] == SETTINGS["temperature"].default


def test_values_are_parsed_by_the_rows_kind() -> None:
    args = parser_with(["temperature", "max_tokens"]).parse_args(
        ["--temperature", "0.25", "--max-tokens", "12"]
    )
    assert args.temperature == 0.25 and isinstance(args.max_tokens, int)
    assert args.settings_fields == ("temperature", "max_tokens")


def test_the_help_names_the_variable_and_the_default() -> None:
    option = Option.of("timeout")
    assert option.help_text() == (
        f"{SETTINGS['timeout'].help} (env PACORE_TIMEOUT; default: {SETTINGS['timeout'].default})"
    )
    assert (
        Option.of("temperature")
        .help_text()
        .endswith(f"default: {SETTINGS['temperature'].default}, the public pipeline's)")
    )
    assert (
        Option.of("temperature", default_text="by model").help_text().endswith("default: by model)")
    )
    flag = next(o for o in MODEL_OPTIONS if o.flag)
    assert flag.help_text().endswith(f"(or {flag.env}=1)")


def test_preset_and_rounds_are_a_mutually_exclusive_pair() -> None:
    parser = parser_with([], shape=True)
    assert parser.parse_args(["--rounds", "4,2"]).rounds == [4, 2]
    assert [o.name for o in SHAPE_OPTIONS] == ["preset", "rounds"]
    with pytest.raises(argparse.ArgumentError, match="not allowed with argument --preset"):
        parser.parse_args(["--preset", "low", "--rounds", "4"])


@pytest.mark.parametrize("widths", ["4,x", "", "4,,2"])
def test_bad_round_widths_are_an_argument_error_naming_the_flag(
    widths: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser(prog="t")
    add_options(parser, [], shape=True)
    with pytest.raises(SystemExit) as caught:
        parser.parse_args(["--rounds", widths])
    assert caught.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("t: error: argument --rounds: --")


def test_a_choice_outside_the_rows_choices_is_refused() -> None:
    name = next(o.name for o in MODEL_OPTIONS if o.choices)
    parser = argparse.ArgumentParser(prog="t")
    add_options(parser, [name])
    with pytest.raises(SystemExit):
        parser.parse_args([f"--{name.replace('_', '-')}", "no-such-choice"])


def test_every_variable_is_in_the_settings_page() -> None:
    """docs/settings.md lists every row's ``PACORE_*`` variable (a new row cannot be missed)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "settings.md").read_text("utf-8")
    missing = [row.env for row in SETTINGS.values() if f"`{row.env}`" not in page]
    assert not missing, f"docs/settings.md does not name {missing}"
    flags = [o.option_string for o in MODEL_OPTIONS + ROUND_CONTROL_OPTIONS]
    missing = [flag for flag in flags if f"`{flag}" not in page]
    assert not missing, f"docs/settings.md does not name {missing}"


def test_every_serve_variable_is_in_the_serve_page() -> None:
    """docs/serve.md lists each of ``pacore serve``'s own rows: its variable and flag."""
    from pacore_graph.settings.fields import SERVE_SETTINGS

    page = (Path(__file__).resolve().parents[2] / "docs" / "serve.md").read_text("utf-8")
    missing = [
        row.env
        for row in SERVE_SETTINGS.values()
        if f"| `{row.env}` | `{row.option_string}` |" not in page
    ]
    assert not missing, f"docs/serve.md does not name {missing}"
