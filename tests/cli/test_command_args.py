"""cli/command_args: the records ``pacore run`` and ``pacore eval`` run with, after the parse.

Built by the real parser and the real settings resolution; the end-to-end use
(a ``--ray`` task carrying one) is tested in test_ray_run.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
import pickle
import sys
import threading
import types
from pathlib import Path

import pytest

from pacore_graph.cli import build_parser, main
from pacore_graph.cli.command_args import EvalArgs, RunArgs, from_namespace
from pacore_graph.cli.common import resolve_settings
from pacore_graph.settings.env_settings import PaCoReSettings
from pacore_graph.testing import ScriptedServer

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


def _receivers_of_a_namespace(argv: list[str]) -> dict[str, set[str]]:
    """Every pacore_graph function that receives an argparse.Namespace while ``main(argv)``
    runs (an argument that is one, or a list, dict or partial holding one), by module."""
    found: dict[str, set[str]] = {}

    def holds(value: object, depth: int = 0) -> bool:
        if isinstance(value, argparse.Namespace):
            return True
        if depth > 1:
            return False
        if isinstance(value, functools.partial):
            return any(holds(v, depth + 1) for v in (*value.args, *value.keywords.values()))
        if type(value) in (list, tuple):
            return any(holds(v, depth + 1) for v in value[:50])
        if type(value) is dict:
            return any(holds(v, depth + 1) for v in list(value.values())[:50])
        return False

    def profile(frame: types.FrameType, event: str, _: object) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not module.startswith("pacore_graph"):
            return
        code = frame.f_code
        count = code.co_argcount + code.co_kwonlyargcount
        count += bool(code.co_flags & inspect.CO_VARARGS) + bool(
            code.co_flags & inspect.CO_VARKEYWORDS
        )
        local = frame.f_locals
        if any(holds(local.get(name)) for name in code.co_varnames[:count]):
            found.setdefault(module, set()).add(code.co_name)

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        code = main(argv)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    assert code == 0
    return found


def test_below_cli_no_function_receives_the_namespace(tmp_path: Path) -> None:
    """Issue 33: the Namespace settles into one record where it is parsed. Followed at run
    time through a whole ``pacore run`` (a question, then a file) against the scripted server."""
    problems = tmp_path / "in.jsonl"
    problems.write_text('{"id": "a", "problem": "What is 17 + 25?"}\n', encoding="utf-8")
    with ScriptedServer().run_in_thread() as srv:
        url = ["--base-url", srv.base_url, "--model", "m", "--no-progress"]
        one = _receivers_of_a_namespace(["run", "What is 17 + 25?", *url])
        many = _receivers_of_a_namespace(
            ["run", "--input", str(problems), "--output", str(tmp_path / "out.jsonl"), *url]
        )
    for found in (one, many):
        assert found, "the trace saw nothing: the test would pass for any code"
        assert set(found) <= {"pacore_graph.cli.common", "pacore_graph.cli.command_args"}, found
