"""cli/command_args: the records ``pacore run`` and ``pacore eval`` run with, after the parse.

Built by the real parser and the real settings resolution; the end-to-end use
(a ``--ray`` task carrying one) is tested in test_ray_run.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import pickle
from pathlib import Path

import pytest

from pacore_graph.cli import build_parser
from pacore_graph.cli.command_args import EvalArgs, RunArgs, from_namespace
from pacore_graph.cli.common import resolve_settings
from pacore_graph.settings.env_settings import PaCoReSettings

#: What the parser adds to a namespace besides the flags (the command and its settings' names).
BOOKKEEPING = {"command", "settings_fields"}
#: What resolve_settings adds: the settings object and the names typed as flags.
RESOLVED = {"settings", "flags_given"}


def _resolved(argv: list[str]) -> argparse.Namespace:
    return resolve_settings(build_parser(argv[0]).parse_args(argv))


@pytest.mark.parametrize(
    ("kind", "argv"),
    [
        (RunArgs, ["run", "Q"]),
        (EvalArgs, ["eval", "--dataset", "d.jsonl", "--out", "ev"]),
    ],
)
def test_a_record_holds_every_flag_of_its_command_but_the_settings_rows(
    kind: type[RunArgs] | type[EvalArgs], argv: list[str]
) -> None:
    """The settings rows live in ``settings``; every other destination is a field, and back."""
    args = _resolved(argv)
    own = set(vars(args)) - set(args.settings_fields) - BOOKKEEPING
    assert {f.name for f in dataclasses.fields(kind)} == own
    assert own >= RESOLVED


def test_from_namespace_reads_the_flags_and_the_resolved_settings() -> None:
    args = _resolved(["run", "--input", "d.jsonl", "--output", "r.jsonl", "--max-tokens", "9"])
    record = from_namespace(RunArgs, args)
    assert (record.input, record.output, record.question) == ("d.jsonl", Path("r.jsonl"), None)
    assert isinstance(record.settings, PaCoReSettings)
    assert record.settings.max_tokens == 9 and record.flags_given == {"max_tokens"}
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.input = "other"  # type: ignore[misc]


def test_a_namespace_missing_a_field_is_refused_not_defaulted() -> None:
    args = _resolved(["run", "Q"])
    del args.checkpoint_timeout
    with pytest.raises(AttributeError, match="checkpoint_timeout"):
        from_namespace(RunArgs, args)


def test_a_record_pickles_whole() -> None:
    """What a ``--ray`` task sends to its worker: the record, settings included."""
    args = _resolved(["eval", "--dataset", "d.jsonl", "--out", "ev", "--temperature", "0.5"])
    record = from_namespace(EvalArgs, args)
    again = pickle.loads(pickle.dumps(record))
    assert again == record and again.settings.temperature == 0.5
