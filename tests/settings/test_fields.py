"""The settings catalogue (settings/fields): each setting declared once, every surface a view.

Each test walks the catalogue itself, so a setting added to it is checked on
every surface without touching this file.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.env_settings import PaCoReSettings, format_settings_error, load_settings
from pacore_graph.settings.fields import (
    LIMIT_NAMES,
    SETTINGS,
    Setting,
    per_run_names,
    serve_names,
)
from pacore_graph.settings.options import MODEL_OPTIONS, SHAPE_OPTIONS
from pacore_graph.settings.validation import describe, setting_name

IN_CONFIG = [row for row in SETTINGS.values() if row.path is not None]


def _field(row: Setting) -> Any:
    """The pydantic field a row's path names in PaCoReConfig."""
    model: Any = PaCoReConfig
    *parents, leaf = row.path or ()
    for part in parents:
        model = model.model_fields[part].annotation
    return model.model_fields[leaf]


def _at(config: PaCoReConfig, row: Setting) -> Any:
    value: Any = config
    for part in row.path or ():
        value = getattr(value, part)
    return value


def _valid_value(row: Setting) -> Any:
    """A value inside the row's bounds that differs from its default."""
    if row.name == "rounds":
        return (3, 2)
    if row.name == "final":
        from pacore_graph.settings.rounds import Round

        return Round(1, temperature=0.5)
    if row.name == "round_quorum":
        return 0.5
    if row.name == "reference_filter":
        return "confidence:0.5"
    if row.choices:
        return next(c for c in row.choices if c != row.default)
    if row.kind is bool:
        return not row.default
    if row.kind is int:
        low = int(row.ge if row.ge is not None else (row.gt or 0) + 1)
        return low + 1 if row.default != low + 1 else low + 2
    low = row.ge if row.ge is not None else (row.gt or 0.0)
    high = row.le if row.le is not None else low + 10.0
    return (low + high) / 2 if (low + high) / 2 != row.default else (low + 3 * high) / 4


@pytest.mark.parametrize("row", IN_CONFIG, ids=lambda r: r.name)
def test_the_config_field_is_declared_from_its_row(row: Setting) -> None:
    field = _field(row)
    assert field.description == row.help
    assert _at(PaCoReConfig(), row) == row.default
    bounds = {k: getattr(m, k) for m in field.metadata for k in ("ge", "gt", "le") if hasattr(m, k)}
    for key in ("ge", "gt", "le"):
        if getattr(row, key) is not None:
            assert bounds[key] == getattr(row, key), (row.name, key)


@pytest.mark.parametrize("row", IN_CONFIG, ids=lambda r: r.name)
def test_with_settings_puts_each_setting_where_its_row_says(row: Setting) -> None:
    value = _valid_value(row)
    config = PaCoReConfig().with_settings({row.name: value})
    assert _at(config, row) == value
    assert PaCoReConfig().with_settings({}) == PaCoReConfig()


@pytest.mark.parametrize(
    "row", [r for r in IN_CONFIG if r.le is not None or r.ge is not None], ids=lambda r: r.name
)
def test_a_value_out_of_bounds_is_named_by_the_surface_that_typed_it(row: Setting) -> None:
    bad = (row.le * 2 + 1) if row.le is not None else (row.ge or 0) - 1
    with pytest.raises(ValidationError) as caught:
        PaCoReConfig().with_settings({row.name: row.kind(bad)})
    assert setting_name(caught.value.errors()[0]["loc"]) == row.name
    line = describe(caught.value, label=lambda n: f"--{n.replace('_', '-')}")
    assert line.startswith(f"--{row.name.replace('_', '-')}: ")


def test_every_flagged_setting_is_a_settings_field_and_a_flag() -> None:
    flags = {o.name: o for o in SHAPE_OPTIONS + MODEL_OPTIONS}
    for name, row in SETTINGS.items():
        if name in flags:
            assert flags[name].help == row.help, name
            assert name in PaCoReSettings.model_fields, name


def test_a_variable_out_of_bounds_is_named_by_its_variable() -> None:
    settings = load_settings({}, env={"PACORE_TEMPERATURE": "9"})
    with pytest.raises(ValidationError) as caught:
        settings.to_config()
    assert describe(caught.value).startswith("temperature: ")
    with pytest.raises(ValidationError) as caught:
        load_settings({}, env={"PACORE_MAX_ROUNDS": "0"})
    assert "PACORE_MAX_ROUNDS" in format_settings_error(caught.value)


def test_per_run_and_serve_surfaces_are_the_rows_marked_so() -> None:
    from pacore_graph.serve.protocol import _HONOURED
    from pacore_graph.settings.per_run import RUN_SETTINGS, RunSettings

    assert per_run_names() == RUN_SETTINGS
    assert set(RunSettings.model_fields) == set(per_run_names())
    assert set(serve_names()) <= _HONOURED


def test_a_serve_request_is_validated_by_the_config_and_named_by_its_field() -> None:
    from pacore_graph.serve.errors import APIError
    from pacore_graph.serve.protocol import parse_request

    body = {"model": "pacore-low", "messages": [{"role": "user", "content": "Q"}]}
    run = parse_request({**body, "temperature": 0.4, "seed": 7, "max_completion_tokens": 9})
    assert run.settings == {"rounds": (4,), "temperature": 0.4, "seed": 7, "max_tokens": 9}
    applied = PaCoReConfig().with_settings(run.settings)
    assert (applied.sampling.temperature, applied.sampling.max_tokens) == (0.4, 9)
    for field, bad in (("temperature", 3.0), ("top_p", 0), ("max_completion_tokens", 0)):
        with pytest.raises(APIError) as caught:
            parse_request({**body, field: bad})
        assert caught.value.param == field
        assert f"'{field}'" in str(caught.value)


def test_the_deepconf_window_default_is_deepconfs() -> None:
    from pacore_graph.control.confidence import DEFAULT_WINDOW

    assert SETTINGS["deepconf_window"].default == DEFAULT_WINDOW == PaCoReConfig().deepconf_window


def test_serve_flags_and_serve_settings_are_the_serve_rows() -> None:
    from pacore_graph.cli.common import resolve_settings
    from pacore_graph.cli.parser import build_parser
    from pacore_graph.serve.settings import ServeSettings
    from pacore_graph.settings.fields import SERVE_SETTINGS

    args = resolve_settings(build_parser("serve").parse_args(["serve"]))
    for name, row in SERVE_SETTINGS.items():
        assert getattr(args, name) == row.default, name
        assert row.env == f"PACORE_SERVE_{name.upper()}"
    served = ServeSettings(upstreams=("http://h:1/v1",), model="m")
    same = {"max_concurrency": "max_concurrency", "max_queue": "max_queue"}
    same.update(passthrough="passthrough", max_samples_in_flight="max_samples_in_flight")
    same.update(max_body_bytes="max_body_bytes", max_connections="max_connections")
    same.update(queue_timeout_s="queue_timeout", header_timeout_s="header_timeout")
    same.update(body_timeout_s="body_timeout")
    for field, row in same.items():
        assert getattr(served, field) == SERVE_SETTINGS[row].default, field
    # a bound is the row's: the one check, naming the flag
    with pytest.raises(ValueError, match=r"--max-queue must be in \[0, 1000000\]"):
        ServeSettings(upstreams=("http://h:1/v1",), model="m", max_queue=-1)


def test_serve_flags_win_over_their_pacore_serve_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    from pacore_graph.cli.common import UsageError, resolve_settings
    from pacore_graph.cli.parser import build_parser

    monkeypatch.setenv("PACORE_SERVE_MAX_QUEUE", "7")
    monkeypatch.setenv("PACORE_SERVE_UPSTREAM", "http://a:1/v1,http://b:2/v1")
    monkeypatch.setenv("PACORE_SERVE_PASSTHROUGH", "false")
    monkeypatch.setenv("PACORE_SERVE_API_KEY", "k")
    args = resolve_settings(build_parser("serve").parse_args(["serve", "--max-queue", "9"]))
    assert args.max_queue == 9  # the flag
    assert args.upstream == ["http://a:1/v1", "http://b:2/v1"] and args.passthrough is False
    assert args.api_key == "k"
    monkeypatch.setenv("PACORE_SERVE_PORT", "eighty")
    with pytest.raises(UsageError, match="PACORE_SERVE_PORT"):
        resolve_settings(build_parser("serve").parse_args(["serve"]))


# --------------------------------------------------------------------------- written once

REPO_ROOT = Path(__file__).resolve().parents[2]
#: Rows whose default code elsewhere is tempted to restate (a keyword's default, a constant).
RESTATED = ("compactor", "session_header", "max_concurrency", *LIMIT_NAMES)
#: The one spelling of a default that values/ (below the catalogue) needs too.
WRITTEN_ONCE_AT = {"pacore_graph/values/compaction.py DEFAULT_COMPACTOR"}


def _defaults(tree: ast.Module) -> Iterator[tuple[str, ast.expr]]:
    """(name, default) for every parameter default, class field and module constant."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                yield target.id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
            yield node.target.id, node.value
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = args.posonlyargs + args.args
            yield from zip(
                (a.arg for a in positional[len(positional) - len(args.defaults) :]),
                args.defaults,
                strict=True,
            )
            yield from (
                (a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d
            )
        elif isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.AnnAssign)
                    and isinstance(stmt.target, ast.Name)
                    and stmt.value is not None
                ):
                    yield stmt.target.id, stmt.value


def test_no_default_the_catalogue_holds_is_restated_as_a_literal() -> None:
    """A keyword, field or constant named after a row (``compactor=``,
    ``DEFAULT_MAX_CONCURRENCY``) names the row's default, never repeats its value."""
    from pacore_graph.values.compaction import DEFAULT_COMPACTOR

    assert SETTINGS["compactor"].default is DEFAULT_COMPACTOR  # the row names the constant
    found = []
    for folder in ("pacore_graph", "graphs", "tools"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            if path.name == "fields.py" and path.parent.name == "settings":
                continue  # where the rows are written
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for name, value in _defaults(tree):
                row = name.lower().removeprefix("default_")
                if row not in RESTATED or not isinstance(value, ast.Constant):
                    continue
                where = f"{path.relative_to(REPO_ROOT)} {name}"
                if value.value == SETTINGS[row].default and where not in WRITTEN_ONCE_AT:
                    found.append(f"{where} (line {value.lineno})")
    assert found == [], "restated defaults: " + ", ".join(found)
