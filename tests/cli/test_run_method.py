"""``pacore run --method SPEC`` and the methods' own flags, over HTTP to a scripted model.

``--rsa-final``, ``--deepconf-keep``, ``--deepconf-window``,
``--reference-filter`` and ``--consensus-weight`` each change what a run
sends or answers, observably on the wire and in the record; a bad one is one
line naming its flag, and nothing is sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import run_argv

from pacore_graph.cli import main
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer, ScriptedToolCall

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


def listing_agent(req: ScriptedRequest) -> ScriptedReply:
    """Explorers as ``reply``; the aggregator agent lists the trajectories, then answers."""
    if req.params.get("tools") and not any(m.get("role") == "tool" for m in req.messages):
        return ScriptedReply(content="", tool_calls=(ScriptedToolCall("list_trajectories", {}),))
    if req.params.get("tools"):
        return ScriptedReply(content="Checked them all: \\boxed{41}", reasoning="read the list")
    return reply(req)


def test_run_method_aggagent_runs_its_explorers_then_the_agent(capsys: Any, tmp_path: Path) -> None:
    with ScriptedServer(listing_agent).run_in_thread() as srv:
        code, out, _ = run(["--method", "aggagent:3", "--json"], srv, capsys)
        assert code == 0
        data = json.loads(out)
        assert data["schedule"] == [3, 1] and data["extra"]["aggregator"] == "aggagent"
        assert data["answer"] == "Checked them all: \\boxed{41}"
        (final,) = data["rounds"][1]
        assert [c["name"] for c in final["tool_calls"]] == ["list_trajectories"]
        bodies = [r.body for r in srv.requests]
        assert bodies[0]["n"] == 3 and "tools" not in bodies[0]
        assert [bool(b.get("tools")) for b in bodies[1:]] == [True, True]
        # A dataset, with the default SQLite checkpoints beside the output.
        data_file, results = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
        rows = [
            {"id": f"p{i}", "messages": [{"role": "user", "content": f"Q{i}?"}]} for i in (1, 2)
        ]
        data_file.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        argv = ["run", "--input", str(data_file), "--output", str(results)]
        argv += ["--method", "aggagent:2", "--no-progress"]
        argv += ["--base-url", srv.base_url, "--model", "scripted"]
        assert main(argv) == 0, capsys.readouterr().err
    lines = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    assert sorted(line["id"] for line in lines) == ["p1", "p2"]
    assert all(line["answer"] == "Checked them all: \\boxed{41}" for line in lines)
    assert all(line["schedule"] == [2, 1] for line in lines)


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


# ------------------------------------------- the methods' own settings (issue 21)

SEED = 300
SYNTHESIS = "You are given a problem and a list of reference responses."
THINKING = " ".join(f"step{i}" for i in range(30))


def trace_of(req: ScriptedRequest) -> int:
    """Which explorer a choice is: round r explorer i is sent seed + 1000*r + i."""
    return (req.seed or 0) + req.sample_index - SEED


def by_input(req: ScriptedRequest) -> ScriptedReply:
    """Every method's scripted model, answering by what it reads (prompt and seed).

    - RSA's aggregation: 42, and 99 when it is the third step's (``--rsa-final aggregate``);
    - PaCoRe's synthesis: 9;
    - an explorer of round 0: trace i says ``ANSWERS[i]`` with ``CONFIDENCE[i]``;
    - a later DeepConf trace (round 1): 0-1 sure of 4, the rest falter after 8 tokens.
    """
    t = trace_of(req)
    if req.last_user.startswith(RSA_START):
        return ScriptedReply(content=f"So \\boxed{{{99 if t >= 2000 else 42}}}", confidence=2.0)
    if req.last_user.startswith(SYNTHESIS):
        return ScriptedReply(content="So \\boxed{9}", confidence=2.0)
    if t >= 1000:
        sure = t - 1000 < 2
        return ScriptedReply(
            content=f"So \\boxed{{{4 if sure else 7}}}",
            reasoning=THINKING,
            confidence=3.0 if sure else (3.0,) * 8 + (0.5,),
        )
    return ScriptedReply(
        content=f"trace says \\boxed{{{ANSWERS[t]}}}", reasoning=THINKING, confidence=CONFIDENCE[t]
    )


ANSWERS = {0: 1, 1: 2, 2: 3, 3: 4}
CONFIDENCE = {0: 3.0, 1: 1.0, 2: 2.0, 3: 4.0}


@pytest.fixture
def model() -> Iterator[ScriptedServer]:
    with ScriptedServer(by_input).run_in_thread() as srv:
        yield srv


def run_json(argv: list[str], srv: ScriptedServer, capsys: Any) -> dict[str, Any]:
    code, out, err = run([*argv, "--seed", str(SEED), "--json"], srv, capsys)
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def references(body: dict[str, Any]) -> int:
    return len(re.findall(r"Reference \d+:", body["messages"][-1]["content"]))


def test_rsa_final_aggregate_makes_one_more_aggregation_call_and_answers_with_it(
    model: ScriptedServer, capsys: Any
) -> None:
    voted = run_json(["--method", "rsa:3,2,2"], model, capsys)
    assert len(model.requests) == 1 + 3  # one n=3 population, three aggregations
    assert voted["answer"] == "So \\boxed{42}" and voted["extra"]["aggregator"] == "majority"
    model.requests.clear()
    aggregated = run_json(["--method", "rsa:3,2,2", "--rsa-final", "aggregate"], model, capsys)
    assert len(model.requests) == 1 + 3 + 1
    assert aggregated["schedule"] == [3, 3, 1] and "aggregator" not in aggregated["extra"]
    last = model.requests[-1].body
    assert last["messages"][-1]["content"].startswith(RSA_START) and last["seed"] == SEED + 2000
    assert aggregated["answer"] == "So \\boxed{99}"  # the extra aggregation's own answer
    assert len(aggregated["rounds"][-1][0]["references"]) == 2


def test_deepconf_keep_and_window_reach_the_online_graph(
    model: ScriptedServer, capsys: Any
) -> None:
    # deepconf-online:6 warms up on traces 0-1 (3.0 and 1.0), then streams four more.
    spec = ["--method", "deepconf-online:6", "--deepconf-keep", "0.5"]
    windowed = run_json([*spec, "--deepconf-window", "4"], model, capsys)
    whole = run_json(spec, model, capsys)
    assert windowed["extra"]["keep"] == whole["extra"]["keep"] == 0.5
    assert windowed["extra"]["threshold"] == 2.0  # the median of [3.0, 1.0]
    assert (windowed["extra"]["window"], whole["extra"]["window"]) == (4, 2048)
    # A 4-token window catches the faltering traces; at 2,048 each is one group, kept.
    assert windowed["extra"]["dropped"] == ["r1.2", "r1.3"]
    assert whole["extra"]["dropped"] == []
    assert windowed["effective_ttc"] < whole["effective_ttc"]


def test_deepconf_keep_and_window_reach_the_offline_graph(
    model: ScriptedServer, capsys: Any
) -> None:
    default = run_json(["--method", "deepconf:4"], model, capsys)
    kept_all = run_json(
        ["--method", "deepconf:4", "--deepconf-keep", "1", "--deepconf-window", "8"],
        model,
        capsys,
    )
    assert default["extra"]["kept"] == ["r0.3"] and default["extra"]["window"] == 2048
    assert kept_all["extra"]["kept"] == ["r0.0", "r0.1", "r0.2", "r0.3"]
    assert (kept_all["extra"]["share"], kept_all["extra"]["window"]) == (1.0, 8)


def test_the_reference_filter_passes_only_the_confident_half_to_the_next_round(
    model: ScriptedServer, capsys: Any
) -> None:
    plain = run_json(["--rounds", "4"], model, capsys)
    plain_bodies = [r.body for r in model.requests]
    model.requests.clear()
    filtered = run_json(["--rounds", "4", "--reference-filter", "confidence:0.5"], model, capsys)
    bodies = [r.body for r in model.requests]
    assert references(plain_bodies[-1]) == 4 and "logprobs" not in plain_bodies[0]
    synthesis = bodies[-1]["messages"][-1]["content"]
    assert references(bodies[-1]) == 2  # the two most confident: traces 3 (4.0) and 0 (3.0)
    assert "boxed{1}" in synthesis and "boxed{4}" in synthesis and "boxed{2}" not in synthesis
    assert all(b["logprobs"] is True and b["top_logprobs"] == 20 for b in bodies)
    (note,) = filtered["extra"]["round_control"]
    assert note == {"round": 1, "reference_filter": "confidence:0.5", "passed": ["r0.0", "r0.3"]}
    assert "round_control" not in plain["extra"]


def test_the_reference_filter_applies_to_every_problem_of_an_input_file(
    model: ScriptedServer, tmp_path: Path, capsys: Any
) -> None:
    data, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = [{"id": f"p{i}", "messages": [{"role": "user", "content": f"Q{i}?"}]} for i in (1, 2)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    argv = run_argv(
        data,
        out,
        "4",
        "--reference-filter",
        "confidence:0.5",
        "--seed",
        str(SEED),
        "--no-progress",
        base_url=model.base_url,
        model="scripted",
    )
    assert main(argv) == 0, capsys.readouterr().err
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(line["id"] for line in lines) == ["p1", "p2"]
    for line in lines:
        (note,) = line["extra"]["round_control"]
        assert note["reference_filter"] == "confidence:0.5" and len(note["passed"]) == 2
    bodies = [r.body for r in model.requests]
    syntheses = [b for b in bodies if b["messages"][-1]["content"].startswith(SYNTHESIS)]
    assert len(syntheses) == 2 and all(references(b) == 2 for b in syntheses)


def test_the_reference_filter_variable_is_read_like_the_flag(
    model: ScriptedServer, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACORE_REFERENCE_FILTER", "confidence:0.5")
    result = run_json(["--rounds", "4"], model, capsys)
    assert references(model.requests[-1].body) == 2
    assert result["extra"]["round_control"][0]["reference_filter"] == "confidence:0.5"


def test_consensus_weight_confidence_lets_the_sure_minority_stop_the_run(
    capsys: Any,
) -> None:
    # Three unsure traces say 7, one sure trace says 4: counted, 7 has 3/4; weighed, 4 has 5/8.
    said = {0: (7, 1.0), 1: (7, 1.0), 2: (7, 1.0), 3: (4, 5.0)}

    def reply(req: ScriptedRequest) -> ScriptedReply:
        answer, conf = said[trace_of(req) % 1000]
        return ScriptedReply(content=f"So \\boxed{{{answer}}}", confidence=conf)

    argv = ["--rounds", "4,2", "--early-stop-consensus", "0.6"]
    with ScriptedServer(reply).run_in_thread() as srv:
        counted = run_json(argv, srv, capsys)
        weighed = run_json([*argv, "--consensus-weight", "confidence"], srv, capsys)
    assert counted["extra"]["early_stop"]["answer"] == "7"
    assert weighed["extra"]["early_stop"]["answer"] == "4"
    assert weighed["extra"]["early_stop"]["share"] == 0.625


def test_a_method_settings_variable_for_another_method_is_ignored(
    model: ScriptedServer, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACORE_RSA_FINAL", "aggregate")
    monkeypatch.setenv("PACORE_DEEPCONF_WINDOW", "4")
    result = run_json(["--rounds", "2"], model, capsys)
    assert result["schedule"] == [2, 1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--reference-filter", "confidence:0"], "--reference-filter: the confidence share"),
        (["--reference-filter", "confidence:x"], "--reference-filter: a reference filter is"),
        (["--reference-filter", "foo:1"], "--reference-filter: a reference filter is"),
        (["--reference-filter", "confidence:0.5,0"], "--reference-filter: the confidence window"),
        (
            ["--reference-filter", "confidence:0.5", "--method", "rsa:3,2,2"],
            "--reference-filter applies to PaCoRe (no --method, or pacore:...), which "
            "--method rsa:3,2,2 does not run",
        ),
        (
            ["--consensus-weight", "confidence", "--method", "majority:3"],
            "--consensus-weight applies to PaCoRe",
        ),
        (["--consensus-weight", "confidence"], "give --early-stop-consensus F too"),
        (["--rsa-final", "aggregate"], "--rsa-final applies to rsa:N,K,T, which PaCoRe does"),
        (
            ["--deepconf-window", "4", "--method", "rsa:3,2,2"],
            "--deepconf-window applies to deepconf:N and deepconf-online:N",
        ),
        (["--deepconf-keep", "0", "--method", "deepconf:4"], "--deepconf-keep: "),
        (["--deepconf-window", "0", "--method", "deepconf:4"], "--deepconf-window: "),
    ],
)
def test_a_bad_method_setting_is_one_line_naming_its_flag_and_sends_nothing(
    model: ScriptedServer, capsys: Any, argv: list[str], message: str
) -> None:
    code, _, err = run(argv, model, capsys)
    assert code == 2
    assert err.startswith("pacore: error: ") and message in err, err
    assert err.strip().count("\n") == 0 and "Traceback" not in err
    assert model.requests == []


def test_a_bad_reference_filter_variable_is_refused_before_any_call(
    model: ScriptedServer, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PACORE_REFERENCE_FILTER", "foo:1")
    code, _, err = run([], model, capsys)
    assert code == 2 and err.startswith("pacore: error: ") and "reference-filter" in err
    assert model.requests == []
