"""``pacore run`` (cli/run), in-process and as a real subprocess.

Every run points ``--base-url`` at a scripted server in a background thread, so
the embedded model is never started.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pacore_graph.cli import main
from pacore_graph.eval.datasets import sample_questions_path
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = sample_questions_path()  # the copy the package ships, not one of its own
REF_RE = re.compile(r"^Reference \d+:$", re.M)
TRAJECTORY_KEYS = {
    "round",
    "index",
    "content",
    "reasoning",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "error",
}


def n_refs(text: str) -> int:
    return len(REF_RE.findall(text))


def by_input(req: ScriptedRequest) -> ScriptedReply:
    refs = n_refs(req.last_user)
    return ScriptedReply(
        content=f"Worked it out.\nThe answer is \\boxed{{{refs}-{req.sample_index}}}",
        reasoning=f"reasoning over {refs} references",
        completion_tokens=3 + req.sample_index,
    )


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(by_input).run_in_thread() as srv:
        yield srv


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def base(srv: ScriptedServer) -> list[str]:
    return ["--base-url", srv.base_url, "--model", "scripted", "--no-progress"]


def widths(srv: ScriptedServer) -> list[int]:
    """Samples per round from the request log: sum of n per distinct prompt."""
    per_prompt: dict[str, int] = defaultdict(int)
    for req in srv.requests:
        prompt = req.body["messages"][-1]["content"]
        per_prompt[prompt] += req.body.get("n", 1)
    return [
        count
        for prompt, count in sorted(
            per_prompt.items(), key=lambda kv: (kv[0].startswith("You are given"), -n_refs(kv[0]))
        )
    ]


def run_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    assert main(argv) == 0
    out = capsys.readouterr().out
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    data: dict[str, Any] = json.loads(lines[0])
    return data


# --------------------------------------------------------------------------- single question


def test_run_json_prints_one_object(server: ScriptedServer, capsys: Any) -> None:
    data = run_json(capsys, ["run", "What is 6*7?", *base(server), "--json"])
    assert data["answer"] == "Worked it out.\nThe answer is \\boxed{4-0}"
    assert data["reasoning"] == "reasoning over 4 references"
    rounds = data["rounds"]
    assert [len(r) for r in rounds] == [4, 1]
    for r, rnd in enumerate(rounds):
        for i, t in enumerate(rnd):
            assert set(t) >= TRAJECTORY_KEYS
            assert (t["round"], t["index"]) == (r, i)
            assert t["error"] is None
            assert t["finish_reason"] == "stop"
            assert t["prompt_tokens"] > 0
            assert t["latency_s"] >= 0
    # Usage of the n=4 request (3+4+5+6) is apportioned over its samples, exactly.
    assert sum(t["completion_tokens"] for t in rounds[0]) == 3 + 4 + 5 + 6
    assert all(t["tokens_estimated"] for t in rounds[0])
    assert data["effective_ttc"] == 3 + 4 + 5 + 6 + 3
    assert data["schedule"] == [4, 1]
    assert data["preset"] == "low"
    assert widths(server) == [4, 1]
    assert server.requests[0].body["messages"] == [{"role": "user", "content": "What is 6*7?"}]


def test_preset_high_runs_32_4_1(server: ScriptedServer, capsys: Any) -> None:
    data = run_json(capsys, ["run", "Q", *base(server), "--json", "--preset", "high"])
    assert [len(r) for r in data["rounds"]] == [32, 4, 1]
    assert data["preset"] == "high"
    assert widths(server) == [32, 4, 1]


def test_rounds_option(server: ScriptedServer, capsys: Any) -> None:
    data = run_json(capsys, ["run", "Q", *base(server), "--json", "--rounds", "3,2"])
    assert [len(r) for r in data["rounds"]] == [3, 2, 1]
    assert data["schedule"] == [3, 2, 1]
    assert data["preset"] is None
    assert widths(server) == [3, 2, 1]
    assert data["answer"].endswith("\\boxed{2-0}")


def test_compactor_answer_passes_only_the_boxed_answer(server: ScriptedServer, capsys: Any) -> None:
    data = run_json(
        capsys, ["run", "Q", *base(server), "--json", "--rounds", "3", "--compactor", "answer"]
    )
    assert [t["message"] for t in data["rounds"][0]] == [
        "\\boxed{0-0}",
        "\\boxed{0-1}",
        "\\boxed{0-2}",
    ]
    assert data["answer"] == "\\boxed{3-0}"
    synthesis = server.requests[-1].body["messages"][-1]["content"]
    assert "Worked it out." not in synthesis
    assert sorted(re.findall(r"\\boxed\{0-\d\}", synthesis)) == [
        "\\boxed{0-0}",
        "\\boxed{0-1}",
        "\\boxed{0-2}",
    ]


def test_plain_output_prints_answer_and_summary(server: ScriptedServer, capsys: Any) -> None:
    assert main(["run", "Q", *base(server), "--rounds", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Worked it out.\nThe answer is \\boxed{2-0}\n")
    summary = out.strip().splitlines()[-1]
    assert "effective TTC: 10 tokens (7, 3)" in summary
    assert "rounds: 2 (2+1)" in summary
    assert "failures: 0" in summary


def test_sampling_options_reach_the_server(server: ScriptedServer, capsys: Any) -> None:
    run_json(
        capsys,
        [
            "run",
            "Q",
            *base(server),
            "--json",
            "--rounds",
            "2",
            "--temperature",
            "0.5",
            "--top-p",
            "0.8",
            "--max-tokens",
            "50",
            "--seed",
            "9",
            "--api-key",
            "cli-key",
        ],
    )
    body = server.requests[0].body
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["seed"]) == (
        0.5,
        0.8,
        50,
        9,
    )
    assert server.requests[0].headers["authorization"] == "Bearer cli-key"


def test_no_batch_sends_one_request_per_explorer(server: ScriptedServer, capsys: Any) -> None:
    data = run_json(capsys, ["run", "Q", *base(server), "--json", "--rounds", "3", "--no-batch"])
    assert [len(r) for r in data["rounds"]] == [3, 1]
    assert len(server.requests) == 4
    assert all("n" not in r.body for r in server.requests)


def test_client_langchain(server: ScriptedServer, capsys: Any) -> None:
    data = run_json(
        capsys, ["run", "Q", *base(server), "--json", "--rounds", "3", "--client", "langchain"]
    )
    assert [len(r) for r in data["rounds"]] == [3, 1]
    assert data["answer"].endswith("\\boxed{3-0}")
    assert data["reasoning"] == "reasoning over 3 references"
    assert [r.body.get("n") for r in server.requests] == [3, None]


# --------------------------------------------------------------------------- datasets


def test_dataset_mode_writes_results_and_resumes(
    server: ScriptedServer, capsys: Any, tmp_path: Path
) -> None:
    data = tmp_path / "in.jsonl"
    shutil.copy(DATA, data)
    out = tmp_path / "out.jsonl"
    argv = ["run", *base(server), "--input", str(data), "--output", str(out), "--rounds", "2"]
    report = run_json(capsys, [*argv, "--json"])
    assert report["problems"] == 5
    assert (report["succeeded"], report["failed"], report["skipped_finished"]) == (5, 0, 0)
    assert report["effective_ttc"] == 5 * (3 + 4 + 3)
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(line["request_id"] for line in lines) == sorted(
        ["math_001", "math_002", "logic_001", "code_001", "physics_001"]
    )
    assert all(line["answer"].endswith("\\boxed{2-0}") for line in lines)
    assert len(server.requests) == 5 * 2

    # A re-run skips every finished problem and sends nothing.
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "skipped_finished=5" in text
    assert "succeeded=0" in text
    assert len(server.requests) == 5 * 2
    assert len(out.read_text(encoding="utf-8").splitlines()) == 5


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_files_a_dataset_run_writes_are_private_whatever_the_umask(
    server: ScriptedServer, capsys: Any, tmp_path: Path, umask: int
) -> None:
    """Issue 31: the output holds the problems and answers; others must not read it."""
    data = tmp_path / "in.jsonl"
    shutil.copy(DATA, data)
    out = tmp_path / "new" / "out.jsonl"
    argv = ["run", *base(server), "--input", str(data), "--output", str(out), "--rounds", "2"]
    before = os.umask(umask)
    try:
        assert main(argv) == 0, capsys.readouterr().err
    finally:
        os.umask(before)
    written = sorted(p for p in out.parent.iterdir())
    assert out in written and any("checkpoints" in p.name for p in written), written
    for path in written:
        assert path.stat().st_mode & 0o777 == 0o600, (path, oct(path.stat().st_mode))
    assert out.parent.stat().st_mode & 0o777 == 0o700
    assert os.umask(before) == before  # the command gave the umask back


def test_dataset_mode_reports_bad_lines_on_stderr(
    server: ScriptedServer, capsys: Any, tmp_path: Path
) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text(
        json.dumps({"id": "ok", "messages": [{"role": "user", "content": "Q"}]}) + "\nnot json\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.jsonl"
    # Exit 3: the good lines ran, but some input was skipped (scripts must notice).
    assert main(["run", *base(server), "--input", str(data), "--output", str(out), "--json"]) == 3
    captured = capsys.readouterr()
    assert f"{data}:line 2: not valid JSON" in captured.err
    report = json.loads(captured.out)
    assert (report["succeeded"], report["input_errors"]) == (1, 1)


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["Q", "--rounds", "0"], "rounds[0] = 0"),
        (["Q", "--rounds", "2000"], "must be in [1, 1024]"),
        (["   "], "empty problem"),
        ([""], "give a QUESTION"),
        (["Q", "--compactor", "nope"], "unknown compactor 'nope'"),
        (["Q", "--compactor", "budget:x"], "budget:N"),
        (["Q", "--temperature", "5"], "temperature"),
        (["--input", "/nonexistent/in.jsonl", "--output", "o.jsonl"], "no such file"),
        (["--input", str(DATA)], "--input needs --output"),
        (["Q", "--input", str(DATA), "--output", "o.jsonl"], "either a QUESTION or --input"),
    ],
)
def test_bad_input_exits_2(
    server: ScriptedServer, capsys: Any, extra: list[str], message: str
) -> None:
    assert main(["run", *extra, *base(server)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pacore: error: ")
    assert message in err
    assert server.request_count == 0


def test_base_url_without_model_exits_2(server: ScriptedServer, capsys: Any) -> None:
    assert main(["run", "Q", "--base-url", server.base_url]) == 2
    assert "--model is required with --base-url" in capsys.readouterr().err
    assert server.request_count == 0


def test_input_without_usable_records_exits_2(
    server: ScriptedServer, capsys: Any, tmp_path: Path
) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text("[1]\n{}\n", encoding="utf-8")
    argv = ["run", *base(server), "--input", str(data), "--output", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "no usable records" in err
    assert "line 1: expected a JSON object" in err


@pytest.mark.parametrize("rounds", ["a,b", "4,x", "", "4,,2", ","])
def test_non_numeric_rounds_exits_2(capsys: Any, rounds: str) -> None:
    with pytest.raises(SystemExit) as info:
        main(
            ["run", "Q", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--rounds", rounds]
        )
    assert info.value.code == 2
    assert "--rounds takes comma-separated positive integers" in capsys.readouterr().err


def test_unreachable_base_url_exits_1(capsys: Any) -> None:
    url = closed_port_url()
    argv = ["run", "Q", "--base-url", url, "--model", "m", "--retries", "1", "--no-progress"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("pacore: run failed: ")
    assert re.search(r"all \d+ explorer calls failed", err)
    assert "cannot reach" in err


# --------------------------------------------------------------------------- subprocess


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop("PACORE_API_KEY", None)
    return subprocess.run(
        [sys.executable, "-m", "pacore_graph.cli", "run", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO_ROOT,
        timeout=60,
        check=False,
    )


def test_subprocess_run_json(server: ScriptedServer) -> None:
    proc = run_cli("What is 2+2?", *base(server), "--json", "--rounds", "3,2")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [len(r) for r in data["rounds"]] == [3, 2, 1]
    assert data["answer"].endswith("\\boxed{2-0}")
    assert data["effective_ttc"] == (3 + 4 + 5) + (3 + 4) + 3
    assert widths(server) == [3, 2, 1]
    assert server.requests[0].headers["authorization"].startswith("Bearer ")


def test_subprocess_langchain_client_exits_cleanly(server: ScriptedServer) -> None:
    proc = run_cli("Q", *base(server), "--rounds", "2", "--client", "langchain")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "Worked it out."
    assert lines[1] == "The answer is \\boxed{2-0}"
    assert "effective TTC: 10 tokens (7, 3)" in lines[-1]
    # The client's HTTP pool is closed at the end: no "Unclosed client session" noise.
    assert "Unclosed" not in proc.stderr


def test_subprocess_bad_rounds_exits_2(server: ScriptedServer) -> None:
    proc = run_cli("Q", *base(server), "--rounds", "0")
    assert proc.returncode == 2
    assert "pacore: error:" in proc.stderr
    assert proc.stdout == ""
    assert server.request_count == 0
