"""``pacore eval``'s grader flags: the code grader and the judge from the command line.

Bad combinations are one-line usage errors before any model call; a code
dataset is graded by running its tests (the results line keeps how many
passed), a judged one by the judge server, whose verdicts land in the
``--out`` folder's cache.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pacore_graph.cli import EXIT_OK, EXIT_USAGE, main
from pacore_graph.eval.code_tests import CODE_TESTS_KEY, CodeTest, CodeTests
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

TESTS = CodeTests(tests=(CodeTest("2 3\n", "5\n", "stdin"), CodeTest("4 4\n", "8", "stdin")))

#: Issue 31's wrong program graded correct: it finds its test in any JSONL file it can
#: read below /tmp/pacore-cheat-* (the dataset, the eval's results.jsonl) and prints the
#: expected output. It knows nothing of the problem.
CHEAT = """
import glob, json, sys

def tests(value):
    if isinstance(value, dict):
        if "input" in value and "output" in value:
            yield value
        for v in value.values():
            yield from tests(v)
    elif isinstance(value, list):
        for v in value:
            yield from tests(v)

given = sys.stdin.read().strip()
for path in glob.glob("/tmp/pacore-cheat-*/**/*.jsonl", recursive=True):
    for line in open(path):
        for test in tests(json.loads(line)):
            if test["input"].strip() == given:
                print(test["output"])
                sys.exit(0)
"""


def reply(request: ScriptedRequest) -> ScriptedReply:
    text = request.last_user
    if text.startswith("Judge whether"):  # the judge: does the response hold the answer?
        response = text.split("[response]:")[1].split("Your judgement")[0]
        correct = text.split("[correct_answer]:")[1].split("reasoning:")[0].strip()
        verdict = "yes" if correct in response else "no"
        return ScriptedReply(content=f"extracted_final_answer: x\ncorrect: {verdict}")
    if "look your test up" in text:
        return ScriptedReply(content=f"```python\n{CHEAT}\n```")
    if "add two numbers" in text:
        return ScriptedReply(content="```python\nprint(sum(map(int, input().split())))\n```")
    return ScriptedReply(content="Answer: Paris")


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(reply).run_in_thread() as srv:
        yield srv


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def code_dataset(tmp_path: Path) -> Path:
    record = {
        "id": "add",
        "messages": [{"role": "user", "content": "Write a program to add two numbers."}],
        "ground_truth": {CODE_TESTS_KEY: TESTS.to_json()},
        "category": "code",
    }
    return write(tmp_path / "code.jsonl", [record])


def one_line_error(capsys: Any) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and err.count("\n") == 0, err
    assert err.startswith("pacore: error: ")
    return err


def base(server: ScriptedServer) -> list[str]:
    return ["--base-url", server.base_url, "--model", "scripted", "--no-progress"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--grader", "judge"], "--grader judge needs --judge-base-url"),
        (["--judge-base-url", "http://127.0.0.1:9/v1"], "go together"),
        (["--judge-base-url", "http://u:p@127.0.0.1:9/v1", "--judge-model", "j"], "user:pass"),
    ],
)
def test_bad_judge_flags_are_one_line_errors(
    server: ScriptedServer, tmp_path: Path, capsys: Any, flags: list[str], message: str
) -> None:
    argv = ["eval", "--dataset", str(code_dataset(tmp_path)), "--out", str(tmp_path / "o")]
    assert main([*argv, *base(server), *flags]) == EXIT_USAGE
    assert message in one_line_error(capsys)
    assert not (tmp_path / "o" / "results.jsonl").exists()  # nothing ran


def test_grader_workers_must_be_positive(server: ScriptedServer, tmp_path: Path) -> None:
    argv = ["eval", "--dataset", str(code_dataset(tmp_path)), "--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, *base(server), "--grader-workers", "0"])
    assert exit_info.value.code == EXIT_USAGE


def test_code_records_are_run_against_their_tests(
    server: ScriptedServer, tmp_path: Path, capsys: Any
) -> None:
    out = tmp_path / "out"
    argv = ["eval", "--dataset", str(code_dataset(tmp_path)), "--out", str(out)]
    code = main([*argv, "--methods", "single", "--grader-workers", "1", *base(server)])
    assert code == EXIT_OK, capsys.readouterr().err
    line = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert line["score"] == 1.0
    assert line["grade_info"] == {"tests": 2, "ran": 2, "passed": 2}


def test_judged_records_go_to_the_judge_and_its_cache(
    server: ScriptedServer, tmp_path: Path, capsys: Any
) -> None:
    record = {
        "id": "capital",
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "ground_truth": {"answer": "Paris", "rubric": "hle"},
        "category": "judge",
    }
    data = write(tmp_path / "hle.jsonl", [record])
    out = tmp_path / "out"
    judge = ["--judge-base-url", server.base_url, "--judge-model", "judge"]
    argv = ["eval", "--dataset", str(data), "--out", str(out), "--methods", "single"]
    assert main([*argv, *base(server), *judge]) == EXIT_OK, capsys.readouterr().err
    line = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert line["score"] == 1.0
    assert line["grade_info"]["judge_verdict"] == "yes"
    assert line["grade_info"]["judge_tokens"] > 0
    assert len((out / "judge-cache.jsonl").read_text().splitlines()) == 1
    report = json.loads((out / "report.json").read_text())
    assert report["judge_tokens"] == line["grade_info"]["judge_tokens"]  # a number
    assert report["judge_verdicts"] == 1
    tokens = line["grade_info"]["judge_tokens"]
    report_md = (out / "report.md").read_text()
    assert f"{tokens} over 1 verdicts (not in effective TTC)" in report_md


@pytest.fixture
def world_readable() -> Iterator[Path]:
    """A folder as datasets and eval outputs sit on real machines: 0755, files 0644."""
    base = Path(tempfile.mkdtemp(prefix="pacore-cheat-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_program_that_looks_its_test_up_scores_nothing(
    server: ScriptedServer, world_readable: Path, capsys: Any
) -> None:
    """Issue 31 (high): it found its test in the world-readable dataset and scored 1.0."""
    record = {
        "id": "cheat",
        "messages": [{"role": "user", "content": "Write a program; look your test up."}],
        "ground_truth": {CODE_TESTS_KEY: TESTS.to_json()},
        "category": "code",
    }
    data = write(world_readable / "code.jsonl", [record])
    data.chmod(0o644)
    out = world_readable / "out"
    argv = ["eval", "--dataset", str(data), "--out", str(out), "--methods", "single,majority:2"]
    code = main([*argv, "--grader-workers", "1", *base(server)])
    assert code == EXIT_OK, capsys.readouterr().err
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 2  # the second one graded could read the first one's line too
    for line in lines:
        assert line["score"] == 0.0, line["grade_info"]
        assert line["grade_info"]["first_failure"]["kind"] == "wrong_answer"


def _by_problem(out: Path) -> dict[str, dict[str, Any]]:
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    return {line["problem_id"]: line for line in lines}


def test_grader_code_runs_the_tests_of_records_with_no_category(
    server: ScriptedServer, tmp_path: Path, capsys: Any
) -> None:
    product = CodeTests(tests=(CodeTest("2 3\n", "6\n", "stdin"),))
    records = [
        {
            "id": problem_id,
            "messages": [{"role": "user", "content": "Write a program to add two numbers."}],
            "ground_truth": {CODE_TESTS_KEY: tests.to_json()},
        }
        for problem_id, tests in (("add", TESTS), ("mul", product))
    ]
    data = write(tmp_path / "plain.jsonl", records)
    out = tmp_path / "out"
    argv = ["eval", "--dataset", str(data), "--out", str(out), "--methods", "single"]
    code = main([*argv, "--grader", "code", "--grader-workers", "1", *base(server)])
    assert code == EXIT_OK, capsys.readouterr().err
    lines = _by_problem(out)
    assert {line["category"] for line in lines.values()} == {None}
    assert (lines["add"]["score"], lines["add"]["grade_info"]) == (
        1.0,
        {"tests": 2, "ran": 2, "passed": 2},
    )
    assert lines["mul"]["score"] == 0.0  # the same program, run against a product test
    assert lines["mul"]["grade_info"]["first_failure"]["kind"] == "wrong_answer"
    report = json.loads((out / "report.json").read_text())
    assert report["grader"] == "code" and report["methods"]["single"]["accuracy"] == 0.5


def test_grader_judge_judges_records_with_no_category(
    server: ScriptedServer, tmp_path: Path, capsys: Any
) -> None:
    records = [
        {
            "id": problem_id,
            "messages": [{"role": "user", "content": f"What is the capital of {land}?"}],
            "ground_truth": {"answer": capital},
        }
        for problem_id, land, capital in (("fr", "France", "Paris"), ("it", "Italy", "Rome"))
    ]
    data = write(tmp_path / "plain.jsonl", records)
    out = tmp_path / "out"
    judge = ["--judge-base-url", server.base_url, "--judge-model", "judge"]
    argv = ["eval", "--dataset", str(data), "--out", str(out), "--methods", "single"]
    assert main([*argv, "--grader", "judge", *judge, *base(server)]) == EXIT_OK, (
        capsys.readouterr().err
    )
    lines = _by_problem(out)
    assert {line["category"] for line in lines.values()} == {None}
    assert (lines["fr"]["score"], lines["it"]["score"]) == (1.0, 0.0)  # both said Paris
    assert [lines[p]["grade_info"]["judge_verdict"] for p in ("fr", "it")] == ["yes", "no"]
    assert {line["grade_info"]["judge_rubric"] for line in lines.values()} == {"hle"}
    assert len((out / "judge-cache.jsonl").read_text().splitlines()) == 2
    report = json.loads((out / "report.json").read_text())
    assert (report["grader"], report["judge_verdicts"]) == ("judge", 2)
    tokens = sum(line["grade_info"]["judge_tokens"] for line in lines.values())
    assert report["judge_tokens"] == tokens
