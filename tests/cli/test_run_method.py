"""``pacore run --method SPEC``: another method than PaCoRe, by its eval spec, over HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pacore_graph.cli import main
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

RSA_START = "You are given a math problem and several candidate solutions."


def reply(req: ScriptedRequest) -> ScriptedReply:
    answer = 42 if req.last_user.startswith(RSA_START) else 40 + req.sample_index
    return ScriptedReply(content=f"So \\boxed{{{answer}}}", reasoning="thinking", confidence=2.0)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(reply).run_in_thread() as srv:
        yield srv


def run(argv: list[str], srv: ScriptedServer, capsys: Any) -> tuple[int, str, str]:
    code = main(
        ["run", "Q?", "--base-url", srv.base_url, "--model", "scripted", "--no-progress", *argv]
    )
    out = capsys.readouterr()
    return code, out.out, out.err


def test_run_method_rsa_prints_its_record(server: ScriptedServer, capsys: Any) -> None:
    code, out, _ = run(["--method", "rsa:3,2,2", "--json"], server, capsys)
    assert code == 0
    data = json.loads(out)
    assert data["schedule"] == [3, 3] and data["answer"] == "So \\boxed{42}"
    assert data["extra"]["aggregator"] == "majority"
    assert all(len(t["references"]) == 2 for t in data["rounds"][1])


def test_run_method_deepconf_asks_for_logprobs(server: ScriptedServer, capsys: Any) -> None:
    code, out, _ = run(["--method", "deepconf:4", "--json"], server, capsys)
    assert code == 0 and json.loads(out)["extra"]["aggregator"] == "deepconf"
    (body,) = [r.body for r in server.requests]
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["n"] == 4


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--method", "rsa:2,3,1"], "--method: method 'rsa:2,3,1': K=3 cannot be drawn"),
        (["--method", "beam:4"], "--method: unknown method 'beam:4'"),
        (["--method", "majority:4", "--template", "t.j2"], "--template is PaCoRe's"),
    ],
)
def test_a_bad_method_is_one_line_and_sends_nothing(
    server: ScriptedServer, capsys: Any, argv: list[str], message: str
) -> None:
    code, _, err = run(argv, server, capsys)
    assert code == 2
    assert err.startswith("pacore: error: ") and message in err and "Traceback" not in err
    assert server.requests == []
