"""Per-request budgets: one validator (``RequestLimits``) behind the CLI, the env and the graph.

The graph's per-run settings are tested in ``test_per_run.py`` and ``pacore
serve``'s requests in ``test_serve_limits.py``; here are the validator itself
and the operator's side: flags, ``PACORE_*`` variables, one-line exit-2 errors.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import ValidationError

from pacore_graph.cli import main
from pacore_graph.settings.env_settings import format_settings_error, load_settings
from pacore_graph.settings.grammar import parse_served_model
from pacore_graph.settings.request_limits import RequestLimitError, RequestLimits
from pacore_graph.testing import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(model="m").run_in_thread() as srv:
        yield srv


def test_the_defaults_pass_the_presets_and_refuse_runaway_requests() -> None:
    limits = RequestLimits()
    for rounds in ([4], [16], [32, 4], [1] * 16, [1024, 1024, 1024, 1023]):
        limits.check(rounds=rounds, max_tokens=131_072)
    with pytest.raises(RequestLimitError) as caught:
        limits.check(rounds=[1024] * 10_000)
    assert caught.value.field == "rounds"
    assert len(str(caught.value)) < 200  # a summary, never the list echoed back
    with pytest.raises(RequestLimitError, match="4097 model calls; at most 4096"):
        limits.check(rounds=[1024] * 4)
    with pytest.raises(RequestLimitError) as caught:
        limits.check(max_tokens=131_073)
    assert caught.value.field == "max_tokens"


def test_check_settings_labels_the_refusal_by_flag_and_variable() -> None:
    """What the settings model and ServeSettings raise: the check's own text, labelled."""
    limits = RequestLimits(max_rounds=2, max_tokens_cap=50)
    limits.check_settings(rounds=[4, 2], max_tokens=50)
    with pytest.raises(ValueError) as caught:
        limits.check_settings(rounds=[1, 1, 1])
    assert not isinstance(caught.value, RequestLimitError)  # pydantic reports a ValueError
    assert str(caught.value) == (
        "--rounds (PACORE_ROUNDS): 3 rounds asked; at most 2 per request (max_rounds)"
    )
    with pytest.raises(ValueError, match=r"^--max-tokens \(PACORE_MAX_TOKENS\): max_tokens 51 "):
        limits.check_settings(max_tokens=51)


@pytest.mark.parametrize(
    ("spec", "calls"),
    [
        ("rsa:16,4,10", 160),  # N x T: every population's candidates
        ("rsa:1024,4,4", 4096),
        ("deepconf:1024", 1024),
        ("deepconf-online:1024", 1024),  # the warm-up and the rest: N in all
        ("majority:1024", 1024),
    ],
)
def test_a_method_is_counted_by_its_model_calls(spec: str, calls: int) -> None:
    method = parse_served_model(spec)
    assert method.expected_trajectories == calls
    RequestLimits(max_samples_per_request=calls).check_method(method)
    with pytest.raises(RequestLimitError) as caught:
        RequestLimits(max_samples_per_request=calls - 1).check_method(method)
    assert caught.value.field == "rounds"
    assert f"{method.family} runs {calls} model calls; at most {calls - 1}" in str(caught.value)


def test_a_method_over_a_cap_is_refused_like_pacore() -> None:
    limits = RequestLimits()
    with pytest.raises(RequestLimitError, match="rsa runs 10240 model calls; at most 4096"):
        limits.check_method(parse_served_model("rsa:1024,4,10"))
    # RSA's populations are its rounds: T over max_rounds is refused before any count.
    with pytest.raises(RequestLimitError, match=r"rsa runs 17 rounds; at most 16 .*max_rounds"):
        limits.check_method(parse_served_model("rsa:1,1,17"))
    RequestLimits(max_rounds=17).check_method(parse_served_model("rsa:1,1,17"))
    # A PaCoRe spec is checked as its widths are, the final round included.
    with pytest.raises(RequestLimitError, match="4097 model calls"):
        limits.check_method(parse_served_model("pacore:1024,1024,1024,1024"))
    long = parse_served_model("rsa:  1024 , 1024 ,  1024")
    with pytest.raises(RequestLimitError) as caught:
        limits.check_method(long)
    assert long.text not in str(caught.value)  # counts, never the text back


def test_caps_are_validated_when_set() -> None:
    for bad in ({"max_rounds": 0}, {"max_samples_per_request": 1}, {"max_tokens_cap": 10**12}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            RequestLimits(**bad)


def test_the_settings_model_applies_the_caps_from_variables() -> None:
    with pytest.raises(ValidationError) as caught:
        load_settings({}, env={"PACORE_ROUNDS": "1024,1024,1024,1024"})
    line = format_settings_error(caught.value)
    assert line.startswith("invalid settings: --rounds (PACORE_ROUNDS): 4 rounds")
    assert "\n" not in line
    raised = load_settings(
        {}, env={"PACORE_ROUNDS": "1024,1024,1024,1024", "PACORE_MAX_SAMPLES_PER_REQUEST": "5000"}
    )
    assert raised.limits().max_samples_per_request == 5000
    for env, named in (
        ({"PACORE_MAX_TOKENS": "200000"}, "--max-tokens (PACORE_MAX_TOKENS): "),
        ({"PACORE_MAX_TOKENS_CAP": "0"}, "PACORE_MAX_TOKENS_CAP: "),
    ):
        with pytest.raises(ValidationError) as caught:
            load_settings({}, env=env)
        assert named in format_settings_error(caught.value)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--rounds", ",".join(["1"] * 17)], "--rounds (PACORE_ROUNDS): 17 rounds"),
        (["--rounds", "1024,1024,1024,1024"], "--rounds (PACORE_ROUNDS): 4 rounds"),
        (["--max-tokens", "200000"], "--max-tokens (PACORE_MAX_TOKENS): max_tokens 200000"),
        (["--max-samples-per-request", "1"], "PACORE_MAX_SAMPLES_PER_REQUEST"),
    ],
)
def test_pacore_run_over_a_cap_is_one_line_exit_2(
    flags: list[str], named: str, server: ScriptedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "Q?", "--base-url", server.base_url, "--model", "m", "--no-progress", *flags]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("pacore: error: invalid settings: ") and named in err
    assert err.count("\n") == 1
    assert server.request_count == 0  # refused before any model call


def test_the_operator_raises_a_cap_with_its_flag(
    server: ScriptedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "Q?", "--base-url", server.base_url, "--model", "m", "--no-progress"]
    assert main([*argv, "--rounds", ",".join(["1"] * 17), "--max-rounds", "17"]) == 0
    assert server.request_count == 18
    assert main([*argv, "--max-tokens", "200000", "--max-tokens-cap", "200000"]) == 0
    capsys.readouterr()


def test_pacore_serve_checks_its_own_max_tokens_against_the_cap(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["serve", "--upstream", "http://127.0.0.1:9/v1", "--model", "m"]
    assert main([*argv, "--max-tokens", "200000"]) == 2
    assert "PACORE_MAX_TOKENS" in capsys.readouterr().err
    assert main([*argv, "--max-rounds", "0"]) == 2
    assert "PACORE_MAX_ROUNDS" in capsys.readouterr().err


def test_a_rounds_own_max_tokens_meets_the_cap_in_the_one_check() -> None:
    from pacore_graph.settings.rounds import Round

    limits = RequestLimits(max_tokens_cap=100)
    limits.check(rounds=[Round(2, max_tokens=100), 3], final=Round(1, max_tokens=100))
    with pytest.raises(RequestLimitError) as caught:
        limits.check(rounds=[3, Round(2, max_tokens=101)])
    assert caught.value.field == "rounds" and "max_tokens 101" in str(caught.value)
    with pytest.raises(RequestLimitError) as caught:
        limits.check(final=Round(1, max_tokens=101))
    assert caught.value.field == "final"
