"""cli/parser: the lazy parser and the command word.

A parser built for one command parses and helps as the full one does; the
other commands' flags are not built (what `main` saves at start-up).
"""

from __future__ import annotations

import argparse

import pytest

from pacore_graph.cli import build_parser, main


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    out = {"pacore": parser.format_help()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out[name] = sub.format_help()
    return out


def test_a_parser_for_one_command_parses_and_helps_as_the_full_one() -> None:
    from pacore_graph.cli.parser import COMMANDS

    full = build_parser()
    full_helps = _helps(full)
    argv = ["run", "q", "--preset", "high", "--max-tokens", "9", "--base-url", "http://h:1/v1"]
    for name in COMMANDS:
        one = build_parser(name)
        assert _helps(one)["pacore"] == full_helps["pacore"]  # every command still listed
        assert _helps(one)[name] == full_helps[name], name
    assert vars(build_parser("run").parse_args(argv)) == vars(full.parse_args(argv))
    # ... and the other commands' flags were not built (what ``main`` saves)
    assert "--algo" in full_helps["train"]
    assert "--algo" not in _helps(build_parser("run"))["train"]


def test_the_command_is_the_first_word_that_is_not_an_option() -> None:
    from pacore_graph.cli.parser import command_in

    assert command_in(["run", "--input", "eval"]) == "run"
    assert command_in(["--version"]) is None
    assert command_in(["-h", "eval", "--dataset", "d"]) == "eval"
    assert command_in(["nonsense", "run"]) is None
    assert command_in([]) is None


def test_an_unknown_command_is_refused_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["runn", "q"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'runn'" in err and "'run'" in err and "'eval'" in err
