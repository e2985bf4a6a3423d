"""One settings model: flag > ``PACORE_*`` variable > default, for the CLI and the served graph."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import ValidationError

import pacore_graph
from pacore_graph.cli import build_parser, main
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.env_settings import PaCoReSettings, format_settings_error, load_settings
from pacore_graph.settings.fields import SETTINGS
from pacore_graph.settings.options import MODEL_OPTIONS, ROUND_CONTROL_OPTIONS, SHAPE_OPTIONS
from pacore_graph.testing import ScriptedServer

# --------------------------------------------------------------------------- the model


def test_the_settings_model_is_the_catalogue_and_every_flag_a_row() -> None:
    # The model is generated from the rows: one field each, nothing declared by hand.
    assert list(PaCoReSettings.model_fields) == list(SETTINGS)
    table = {o.name: o for o in SHAPE_OPTIONS + MODEL_OPTIONS + ROUND_CONTROL_OPTIONS}
    assert set(table) == {name for name, row in SETTINGS.items() if row.flag}
    for name, option in table.items():
        row = SETTINGS[name]
        default = PaCoReSettings.model_fields[name].default
        assert default == (False if option.flag else option.default), name
        # a setting the config holds is "not given" until given: the config's default applies
        assert default == (False if row.kind is bool else row.default if row.path is None else None)
        assert option.help == row.help and option.env == row.env


def test_the_defaults_the_help_states_are_the_configs() -> None:
    config = PaCoReConfig()
    states = {o.name: o.help_text() for o in MODEL_OPTIONS}
    assert f"default: {config.sampling.temperature}" in states["temperature"]
    assert f"default: {config.sampling.top_p}" in states["top_p"]
    assert f"default: {config.sampling.timeout:g}" in states["timeout"]
    assert f"default: {config.shuffle_seed}" in states["shuffle_seed"]
    assert f"default: {config.retry.max_attempts}" in states["retries"]
    assert f"else {config.max_concurrency}" in states["max_concurrency"]
    assert f"default: {config.reference_order}" in states["reference_order"]


def test_a_flag_wins_over_its_variable_which_wins_over_the_default() -> None:
    env = {"PACORE_MAX_TOKENS": "99", "PACORE_MODEL": "from-env"}
    assert load_settings({}, env={}).max_tokens is None
    assert load_settings({}, env=env).max_tokens == 99
    assert load_settings({"max_tokens": 7}, env=env).max_tokens == 7
    # None means "flag not given": the variable still applies.
    assert load_settings({"max_tokens": None}, env=env).max_tokens == 99
    assert load_settings({"model": "from-flag"}, env=env).model == "from-flag"


def test_list_values_are_comma_separated_in_the_environment() -> None:
    env = {"PACORE_BASE_URL": "http://a:1/v1, http://b:2/v1", "PACORE_ROUNDS": "8,2"}
    settings = load_settings({}, env=env)
    assert settings.base_url == ["http://a:1/v1", "http://b:2/v1"]
    assert settings.rounds == [8, 2] and settings.round_widths() == [8, 2]
    flagged = load_settings({"base_url": ["http://c:3/v1"]}, env=env)
    assert flagged.base_url == ["http://c:3/v1"]


def test_a_preset_flag_hides_the_rounds_variable_and_back() -> None:
    env = {"PACORE_ROUNDS": "8,2", "PACORE_PRESET": "medium"}
    assert load_settings({"preset": "high"}, env=env).round_widths() == [32, 4]
    assert load_settings({"rounds": [3]}, env=env).round_widths() == [3]
    assert load_settings({}, env={"PACORE_PRESET": "high"}).round_widths() == [32, 4]
    assert load_settings({}, env={}).round_widths() == [4]


def test_boolean_variables() -> None:
    env = {"PACORE_NO_BATCH": "1", "PACORE_LOGPROBS": "true"}
    settings = load_settings({}, env=env)
    assert settings.no_batch and settings.logprobs
    config = settings.to_config()
    assert config.batch_samples is False and config.sampling.logprobs is True


def test_a_bad_variable_is_one_line_naming_it() -> None:
    with pytest.raises(ValidationError) as info:
        load_settings({}, env={"PACORE_TEMPERATURE": "warm", "PACORE_CLIENT": "carrier-pigeon"})
    line = format_settings_error(info.value)
    assert "\n" not in line
    assert "PACORE_TEMPERATURE" in line and "PACORE_CLIENT" in line


def test_only_the_listed_options_read_their_variables() -> None:
    env = {"PACORE_PRESET": "high", "PACORE_TEMPERATURE": "0.5", "PACORE_MODEL": "m"}
    settings = load_settings({}, env=env, only=["temperature"])
    assert settings.temperature == 0.5
    assert settings.preset is None and settings.model is None
    # a bad variable of an option the command does not list does not stop it
    assert load_settings({}, env={"PACORE_PRESET": "bogus"}, only=["model"]).preset is None


def test_serve_reads_the_sampling_variables_but_not_the_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pacore_graph.cli import resolve_settings

    monkeypatch.setenv("PACORE_TEMPERATURE", "0.25")
    monkeypatch.setenv("PACORE_MODEL", "not-serves-model")
    monkeypatch.setenv("PACORE_PRESET", "bogus")
    args = build_parser().parse_args(["serve", "--upstream", "http://h:1/v1", "--model", "up"])
    resolved = resolve_settings(args)
    assert resolved.temperature == 0.25 and resolved.model == "up"
    assert resolved.compactor == "conclusion"
    assert args.temperature is None  # the parser's namespace is left as parsed


def test_unrelated_pacore_variables_are_ignored() -> None:
    settings = load_settings({}, env={"PACORE_REQUIRE_POSTGRES": "1", "PACORE_EMBEDDED_LOG": "x"})
    assert settings == PaCoReSettings.model_validate({})


def test_both_settings_models_read_flags_then_their_own_variables_from_one_base(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One ``settings_customise_sources``, inherited: flags, then the prefixed variables of
    the given mapping; a ``.env`` file in the working directory is never read."""
    from pacore_graph.settings.env_settings import PaCoReServeSettings, load_serve_settings

    own = [
        cls
        for cls in PaCoReSettings.__mro__
        if "settings_customise_sources" in vars(cls) and cls.__module__ == PaCoReSettings.__module__
    ]
    served = [
        cls
        for cls in PaCoReServeSettings.__mro__
        if "settings_customise_sources" in vars(cls)
        and cls.__module__ == PaCoReServeSettings.__module__
    ]
    assert len(own) == 1 and own == served  # declared once, on the shared base
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("PACORE_MODEL=from-dotenv\nPACORE_SERVE_MAX_QUEUE=5\n")
    env = {
        "PACORE_MODEL": "run-model",
        "PACORE_SERVE_MODEL": "serve-model",
        "PACORE_MAX_QUEUE": "7",
    }
    assert load_settings({}, env=env).model == "run-model"
    assert load_settings({"model": "flag"}, env=env).model == "flag"
    assert load_settings({}, env={}).model is None  # not the .env file's
    server = load_serve_settings({}, env=env)
    assert (server.model, server.max_queue) == ("serve-model", 1024)  # PACORE_MAX_QUEUE: not its
    assert load_serve_settings({"max_queue": 3}, env={"PACORE_SERVE_MAX_QUEUE": "9"}).max_queue == 3
    assert load_serve_settings({}, env={"PACORE_SERVE_MAX_QUEUE": "9"}).max_queue == 9


def test_embedded_defaults_apply_only_where_nothing_was_given() -> None:
    assert load_settings({}, env={}).to_config(embedded=True).sampling.max_tokens == 256
    assert load_settings({}, env={}).to_config(embedded=True).max_concurrency == 16
    given = load_settings({}, env={"PACORE_MAX_TOKENS": "9"}).to_config(embedded=True)
    assert given.sampling.max_tokens == 9
    assert load_settings({}, env={}).to_config().sampling.max_tokens is None


def test_the_methods_settings_are_read_from_their_variables_into_the_config() -> None:
    env = {
        "PACORE_REFERENCE_FILTER": "confidence:0.50",
        "PACORE_CONSENSUS_WEIGHT": "confidence",
        "PACORE_RSA_FINAL": "aggregate",
        "PACORE_DEEPCONF_KEEP": "0.25",
        "PACORE_DEEPCONF_WINDOW": "64",
    }
    config = load_settings({}, env=env).to_config()
    assert config.reference_filter == "confidence:0.5"
    assert (config.consensus_weight, config.rsa_final) == ("confidence", "aggregate")
    assert (config.deepconf_keep, config.deepconf_window) == (0.25, 64)
    flagged = load_settings({"rsa_final": "majority", "deepconf_window": 8}, env=env).to_config()
    assert (flagged.rsa_final, flagged.deepconf_window) == ("majority", 8)
    assert load_settings({}, env={}).to_config() == PaCoReConfig()
    with pytest.raises(ValidationError) as info:
        load_settings({}, env={"PACORE_RSA_FINAL": "best"})
    assert "PACORE_RSA_FINAL" in format_settings_error(info.value)


def test_load_settings_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PACORE_SEED", "1234")
    assert load_settings({}).seed == 1234
    assert load_settings({}, env={}).seed is None


# --------------------------------------------------------------------------- the CLI


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(model="env-model").run_in_thread() as srv:
        yield srv


def test_pacore_run_reads_the_server_from_the_environment(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PACORE_BASE_URL", server.base_url)
    monkeypatch.setenv("PACORE_MODEL", "env-model")
    monkeypatch.setenv("PACORE_MAX_TOKENS", "77")
    monkeypatch.setenv("PACORE_ROUNDS", "3")
    assert main(["run", "What is 2+2?", "--json", "--no-progress"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [len(r) for r in result["rounds"]] == [3, 1]
    assert {r.body["model"] for r in server.requests} == {"env-model"}
    assert {r.body["max_tokens"] for r in server.requests} == {77}


def test_pacore_run_flags_win_over_the_environment(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PACORE_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    monkeypatch.setenv("PACORE_MODEL", "other")
    monkeypatch.setenv("PACORE_MAX_TOKENS", "77")
    monkeypatch.setenv("PACORE_ROUNDS", "5")
    argv = ["run", "Q?", "--json", "--no-progress", "--preset", "low", "--max-tokens", "12"]
    code = main([*argv, "--base-url", server.base_url, "--model", "env-model"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert [len(r) for r in result["rounds"]] == [4, 1]
    assert {r.body["max_tokens"] for r in server.requests} == {12}
    assert {r.body["model"] for r in server.requests} == {"env-model"}


def test_a_bad_variable_exits_2_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PACORE_MAX_TOKENS", "lots")
    assert main(["run", "Q?", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("pacore: error:") and "PACORE_MAX_TOKENS" in err
    assert "\n" not in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"pacore {pacore_graph.__version__}"


def test_python_dash_m_pacore_graph_is_the_command() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pacore_graph", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == f"pacore {pacore_graph.__version__}"
    bad = subprocess.run(
        [sys.executable, "-m", "pacore_graph", "run"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "pacore: error:" in bad.stderr


# --------------------------------------------------------------------------- help


def _subparsers(
    parser: argparse.ArgumentParser, path: str
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _subparsers(sub, f"{path} {name}")


def _help_of(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()
    return formatter._get_help_string(action) or ""  # type: ignore[attr-defined]


def test_every_option_of_every_command_states_its_default() -> None:
    undocumented = []
    commands = []
    for path, parser in _subparsers(build_parser(), "pacore"):
        commands.append(path)
        for action in parser._actions:
            if (
                not action.option_strings  # positionals are required or described
                or action.nargs == 0  # flags: store_true, --help, --version
                or action.required
            ):
                continue
            if "default" not in _help_of(parser, action):
                undocumented.append(f"{path} {action.option_strings[0]}")
    assert "pacore run" in commands and "pacore model serve" in commands
    assert not undocumented, undocumented


def _command(name: str) -> argparse.ArgumentParser:
    return dict(_subparsers(build_parser(), "pacore"))[f"pacore {name}"]


def test_run_help_states_the_preset_and_the_embedded_token_cap() -> None:
    run = _command("run")
    flat = " ".join(run.format_help().split())
    assert "default: low" in flat
    assert "256 on the embedded model, unset otherwise" in flat
    assert "PACORE_BASE_URL" in flat
    helps = {a.option_strings[0]: a.help for a in run._actions if a.option_strings}
    assert helps["--temperature"] and helps["--top-p"]


def test_swe_lists_no_text_graph_only_flags() -> None:
    text = _command("swe").format_help()
    for flag in ("--compactor", "--no-batch", "--client", "--logprobs", "--no-progress"):
        assert flag not in text
    for flag in ("--reference-filter", "--rsa-final", "--deepconf-keep", "--deepconf-window"):
        assert flag not in text
    assert "--preset" in text and "--max-tokens" in text


def test_run_and_eval_list_the_methods_settings_with_variable_and_default() -> None:
    for command in ("run", "eval"):
        flat = " ".join(_command(command).format_help().split())
        assert "--reference-filter confidence:F" in flat and "PACORE_REFERENCE_FILTER" in flat
        assert "--consensus-weight {count,confidence}" in flat
        assert "--rsa-final {majority,aggregate}" in flat and "default: majority" in flat
        assert "--deepconf-keep F" in flat and "--deepconf-window N" in flat
        assert "PACORE_DEEPCONF_WINDOW; default: 2048" in flat


# --------------------------------------------------------------------------- round control

_ROUND_CONTROL_ENV = {
    "PACORE_ROUND_QUORUM": "0.75",
    "PACORE_ROUND_DEADLINE": "30",
    "PACORE_EARLY_STOP_CONSENSUS": "0.6",
    "PACORE_TOKEN_BUDGET": "5000",
}


def test_the_round_control_rows_are_read_from_their_variables() -> None:
    config = load_settings({}, env=_ROUND_CONTROL_ENV).to_config()
    assert config.round_quorum == 0.75 and config.round_deadline == 30.0
    assert config.early_stop_consensus == 0.6 and config.token_budget == 5000
    # "24" is a count, as on the command line (parsed once, by the config)
    assert load_settings({}, env={"PACORE_ROUND_QUORUM": "24"}).to_config().round_quorum == 24
    assert load_settings({}, env={}).to_config().round_quorum is None


def test_a_round_control_flag_wins_over_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    from pacore_graph.cli import resolve_settings

    for name, value in _ROUND_CONTROL_ENV.items():
        monkeypatch.setenv(name, value)
    argv = ["run", "Q", "--round-quorum", "3", "--token-budget", "7"]
    resolved = resolve_settings(build_parser().parse_args(argv))
    config = resolved.settings.to_config()
    assert config.round_quorum == 3 and config.token_budget == 7  # the flags
    assert config.round_deadline == 30.0 and config.early_stop_consensus == 0.6  # the variables
    assert resolved.flags_given >= {"round_quorum", "token_budget"}
    assert "round_deadline" not in resolved.flags_given


def test_a_bad_round_control_variable_is_one_line_and_sends_nothing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PACORE_EARLY_STOP_CONSENSUS", "1.5")
    with ScriptedServer(lambda request: "never asked").run_in_thread() as srv:
        code = main(["run", "Q", "--base-url", srv.base_url, "--model", "m", "--no-progress"])
        assert srv.request_count == 0
    assert code == 2
    err = capsys.readouterr().err
    assert "--early-stop-consensus" in err and err.count("\n") == 1


def test_a_round_control_variable_changes_the_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """PACORE_EARLY_STOP_CONSENSUS stops a run whose explorers agree after its first round."""

    def agreeing(request: Any) -> str:
        return "I am sure: \\boxed{4}"

    monkeypatch.setenv("PACORE_EARLY_STOP_CONSENSUS", "0.75")
    with ScriptedServer(agreeing).run_in_thread() as srv:
        argv = ["run", "Q", "--json", "--base-url", srv.base_url, "--model", "scripted"]
        assert main([*argv, "--rounds", "4,2", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["extra"]["early_stop"]["skipped_widths"] == [2, 1]
    assert len(out["rounds"]) == 1


def test_the_caps_are_built_once_from_the_settings_and_handed_out_as_validated() -> None:
    """Issue 33: one RequestLimits per run, the one the settings checked (the CLI passes it
    to the graph, so a run's context is capped by --max-tokens-cap, not by the defaults)."""
    settings = load_settings(
        {"max_tokens": 50}, env={"PACORE_MAX_TOKENS_CAP": "64", "PACORE_MAX_ROUNDS": "3"}
    )
    limits = settings.limits()
    assert limits is settings.limits()
    assert (limits.max_tokens_cap, limits.max_rounds) == (64, 3)
    with pytest.raises(ValidationError, match="over the cap of 64"):
        load_settings({"max_tokens": 65}, env={"PACORE_MAX_TOKENS_CAP": "64"})
