"""Dataset runs: reading JSONL, output lines, resuming.

The model is the in-process fake (answers by input); the runner's HTTP path is
the same graph, tested in test_http_run.py and tests/cli/test_run.py.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.eval.datasets import sample_questions_path
from pacore_graph.runs.runner import (
    DatasetRecord,
    finished_ids,
    read_dataset,
    result_line,
    run_dataset,
)
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply

DATA = sample_questions_path()  # the copy the package ships, not one of its own
SAMPLE_IDS = ["math_001", "math_002", "logic_001", "code_001", "physics_001"]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def problem_of(call: FakeCall) -> str:
    """The original problem: round 0 sends it as is, later rounds inside the template."""
    text = call.last_user
    if text.startswith("You are given a problem"):
        text = text.split("Original Problem:\n", 1)[1].split("\n\nReference Responses:", 1)[0]
    return text


class Model:
    """Replies by input; problems whose text contains a word in ``broken`` fail."""

    def __init__(self, broken: set[str] | None = None) -> None:
        self.broken = broken or set()

    def __call__(self, call: FakeCall) -> FakeReply:
        problem = problem_of(call)
        if any(word in problem for word in self.broken):
            return FakeReply(content="", error="HTTP 500: scripted outage")
        tag = hashlib.sha256(f"{problem}|{call.sample_index}".encode()).hexdigest()[:6]
        return FakeReply(
            content=f"<think>work {tag}</think>answer {tag}",
            reasoning=f"reasoning {tag}",
            completion_tokens=5 + call.sample_index,
        )


def graph_and_client(
    broken: set[str] | None = None, rounds: tuple[int, ...] = (3,)
) -> tuple[Any, FakeChatClient]:
    client = FakeChatClient(reply=Model(broken))
    return build_pacore_graph(client, config=PaCoReConfig(rounds=rounds)), client


def read_output(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


# --------------------------------------------------------------------------- read_dataset


def test_read_dataset_reports_bad_lines_and_keeps_the_rest(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "in.jsonl",
        [
            json.dumps({"id": "a", "messages": [{"role": "user", "content": "Q a"}]}),
            '{"id": "b", "messages": [',
            "[1, 2, 3]",
            json.dumps({"id": "c", "ground_truth": "4"}),
            json.dumps({"id": "d", "messages": [{"role": "user", "content": "   "}]}),
            json.dumps({"id": "a", "messages": [{"role": "user", "content": "Q a again"}]}),
            "",
            json.dumps({"question": "Q by question field"}),
            json.dumps(
                {
                    "id": 17,
                    "conversation": [
                        {"role": "system", "content": "be brief"},
                        {"role": "user", "content": "Q conv"},
                    ],
                    "ground_truth": {"answer": "5"},
                }
            ),
            json.dumps({"id": "e", "messages": "not a list"}),
            json.dumps({"id": "f", "problem": "Q by problem field", "answer": "2"}),
            json.dumps({"id": "g", "prompt": "Q by prompt field"}),
        ],
    )
    records, errors = read_dataset(path)
    assert [(r.id, r.line) for r in records] == [
        ("a", 1),
        ("req_7", 8),
        ("17", 9),
        ("f", 11),
        ("g", 12),
    ]
    assert records[3].messages == ({"role": "user", "content": "Q by problem field"},)
    assert records[4].messages == ({"role": "user", "content": "Q by prompt field"},)
    assert records[0].messages == ({"role": "user", "content": "Q a"},)  # the first "a" is kept
    assert records[1].messages == ({"role": "user", "content": "Q by question field"},)
    assert records[2].messages[-1]["content"] == "Q conv"
    assert records[2].ground_truth == {"answer": "5"}
    assert [e.line for e in errors] == [2, 3, 4, 5, 6, 10]
    text = [str(e) for e in errors]
    assert text[0].startswith("line 2: not valid JSON")
    assert text[1] == "line 3: expected a JSON object, got list"
    assert "'messages' must be a list" in text[2] and "'problem'" in text[2]
    assert "empty problem" in text[3]
    assert text[4] == "line 6: duplicate id 'a'"
    assert "'messages' must be a list" in text[5] and "'problem'" not in text[5]


def test_read_dataset_on_the_sample_questions() -> None:
    records, errors = read_dataset(DATA)
    assert errors == []
    assert [r.id for r in records] == SAMPLE_IDS
    assert [r.line for r in records] == [1, 2, 3, 4, 5]
    assert records[0].ground_truth == {"answer": "5050"}
    assert records[3].ground_truth is None  # the code problem has none
    assert records[0].raw["category"] == "math"


# --------------------------------------------------------------------------- finished_ids


def test_finished_ids(tmp_path: Path) -> None:
    assert finished_ids(tmp_path / "missing.jsonl") == set()
    path = write_lines(
        tmp_path / "out.jsonl",
        [
            json.dumps({"request_id": "ok1", "answer": "x"}),
            json.dumps({"request_id": "bad", "error": "RoundFailedError: boom"}),
            json.dumps({"request_id": 7, "answer": "y"}),
            json.dumps({"answer": "no id"}),
            "[1, 2]",
            '{"request_id": "cut", "answ',  # a line cut by an interrupted run
            "",
        ],
    )
    assert finished_ids(path) == {"ok1", "7"}


# --------------------------------------------------------------------------- run_dataset


async def test_the_progress_bar_counts_problems(tmp_path: Path) -> None:
    import io
    import re

    records, _ = read_dataset(DATA)
    graph, _ = graph_and_client(rounds=(2,))
    bar = io.StringIO()
    await run_dataset(graph, records, tmp_path / "o.jsonl", progress=True, progress_file=bar)
    text = bar.getvalue()
    # The rate reads "problem/s" (or "s/problem" when slow), never tqdm's "pb/s".
    assert re.search(r"problem/s|s/problem", text), text
    assert not re.search(r"\bpb\b|pb/s|s/pb", text), text
    assert "5/5" in text


async def test_run_dataset_writes_full_lines(tmp_path: Path) -> None:
    records, _ = read_dataset(DATA)
    out = tmp_path / "sub" / "results.jsonl"
    graph, client = graph_and_client(rounds=(3,))
    summary = await run_dataset(graph, records, out, progress=False)
    assert (summary.total, summary.succeeded, summary.failed, summary.skipped) == (5, 5, 0, 0)
    lines = read_output(out)
    assert sorted(line["request_id"] for line in lines) == sorted(SAMPLE_IDS)
    assert client.requests == 5 * 2  # batched: one request per round per problem
    by_id = {line["request_id"]: line for line in lines}
    for record in records:
        line = by_id[record.id]
        assert line["id"] == line["problem_id"] == record.id
        assert line["messages"] == list(record.messages)
        rounds = line["rounds"]
        assert [len(r) for r in rounds] == [3, 1]
        final = rounds[-1][0]
        assert line["final_response"] == final["content"]
        assert line["final_response"].startswith("<think>work ")
        assert line["final_reasoning_content"] == final["reasoning"]
        assert line["answer"] == final["message"] == final["content"].split("</think>")[1]
        assert line["round_responses"] == [
            [{"content": t["content"], "reasoning_content": t["reasoning"]} for t in rnd]
            for rnd in rounds
        ]
        assert line["effective_ttc"] == (5 + 6 + 7) + 5
        assert line["schedule"] == [3, 1]
        assert line["category"] == record.raw["category"]
        if record.ground_truth is None:
            assert "ground_truth" not in line
        else:
            assert line["ground_truth"] == record.ground_truth
        assert "error" not in line
    assert summary.effective_ttc == 5 * 23


async def test_run_dataset_resumes_skipping_finished_and_retrying_failed(
    tmp_path: Path,
) -> None:
    records, _ = read_dataset(DATA)
    out = tmp_path / "results.jsonl"

    # First run: the logic problem's server is down.
    graph, client = graph_and_client(broken={"Box A"})
    seen: list[tuple[str, bool]] = []
    summary = await run_dataset(
        graph,
        records,
        out,
        progress=False,
        on_result=lambda rec, res, exc: seen.append((rec.id, exc is None)),
    )
    assert (summary.succeeded, summary.failed) == (4, 1)
    assert sorted(seen) == sorted((i, i != "logic_001") for i in SAMPLE_IDS)
    failed = [line for line in read_output(out) if "error" in line]
    assert [line["request_id"] for line in failed] == ["logic_001"]
    assert failed[0]["error"].startswith("RoundFailedError: round 0: all 3 explorer calls failed")
    assert "scripted outage" in failed[0]["error"]
    assert finished_ids(out) == set(SAMPLE_IDS) - {"logic_001"}

    # Second run, same output: only the failed problem runs again.
    graph, client = graph_and_client()
    summary = await run_dataset(graph, records, out, progress=False)
    assert (summary.total, summary.skipped, summary.succeeded, summary.failed) == (5, 4, 1, 0)
    assert client.requests == 2
    assert {problem_of(c) for c in client.calls} == {records[2].messages[0]["content"]}
    assert len(client.calls) == 3 + 1
    assert finished_ids(out) == set(SAMPLE_IDS)
    lines = read_output(out)
    # Exactly one line per id: the retry's success replaced the old error line.
    assert sorted(line["request_id"] for line in lines) == sorted(SAMPLE_IDS)
    assert not any("error" in line for line in lines)

    # Third run: nothing left to do, no model calls.
    graph, client = graph_and_client()
    summary = await run_dataset(graph, records, out, progress=False)
    assert (summary.skipped, summary.succeeded, client.requests) == (5, 0, 0)
    assert read_output(out) == lines


async def test_run_dataset_skips_prewritten_lines(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    shutil.copy(DATA, data)
    records, _ = read_dataset(data)
    out = write_lines(
        tmp_path / "results.jsonl",
        [
            json.dumps({"request_id": "math_001", "answer": "5050"}),
            json.dumps({"request_id": "math_002", "error": "ModelCallError: earlier outage"}),
            '{"request_id": "code_001", "final_resp',  # interrupted mid-write
        ],
    )
    graph, client = graph_and_client()
    summary = await run_dataset(graph, records, out, progress=False)
    assert (summary.skipped, summary.succeeded) == (1, 4)
    asked = {problem_of(c) for c in client.calls}
    assert asked == {r.messages[-1]["content"] for r in records if r.id != "math_001"}
    assert finished_ids(out) == set(SAMPLE_IDS)


async def test_run_dataset_with_a_subset_counts_only_its_records(tmp_path: Path) -> None:
    records, _ = read_dataset(DATA)
    out = tmp_path / "results.jsonl"
    graph, _ = graph_and_client()
    await run_dataset(graph, records[:2], out, progress=False)
    summary = await run_dataset(graph, records[1:3], out, progress=False)
    assert (summary.total, summary.skipped, summary.succeeded) == (2, 1, 1)


def test_result_line_keeps_public_fields_first() -> None:
    from pacore_graph.values.records import PaCoReResult, Trajectory

    final = Trajectory(round=1, index=0, content="C", reasoning=None, message="C")
    result = PaCoReResult(
        answer="C",
        reasoning=None,
        rounds=((Trajectory(round=0, index=0, content="A", message="A"),), (final,)),
        schedule=(1, 1),
    )
    record = DatasetRecord(id="x", messages=({"role": "user", "content": "Q"},), line=1)
    line = result_line(record, result)
    assert list(line)[:4] == [
        "request_id",
        "final_response",
        "final_reasoning_content",
        "round_responses",
    ]
    assert line["final_reasoning_content"] == ""  # never null, like the public pipeline
    assert line["round_responses"] == [
        [{"content": "A", "reasoning_content": ""}],
        [{"content": "C", "reasoning_content": ""}],
    ]
    assert line["problem_id"] == "x"
    json.dumps(line)  # serialisable


@pytest.mark.parametrize("in_flight", [1, 3])
async def test_run_dataset_limits_problems_in_flight(tmp_path: Path, in_flight: int) -> None:
    records, _ = read_dataset(DATA)
    graph, _ = graph_and_client()
    active = 0
    peak = 0

    class Counting:
        async def ainvoke(self, state: dict[str, Any]) -> Any:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            try:
                return await graph.ainvoke(state)
            finally:
                active -= 1

    summary = await run_dataset(
        Counting(), records, tmp_path / "o.jsonl", progress=False, max_problems_in_flight=in_flight
    )
    assert summary.succeeded == 5
    assert peak == in_flight


async def test_resume_after_a_cut_last_line_loses_nothing(tmp_path: Path) -> None:
    """An interrupted write leaves a line with no newline; the next run must not glue onto it."""
    from pacore_graph import PaCoReConfig, build_pacore_graph
    from pacore_graph.runs.runner import DatasetRecord, finished_ids, run_dataset
    from pacore_graph.testing.fake_client import FakeChatClient

    records = [
        DatasetRecord(id=f"p{i}", messages=({"role": "user", "content": f"Q{i}"},), line=i + 1)
        for i in range(3)
    ]
    out = tmp_path / "results.jsonl"
    graph = build_pacore_graph(FakeChatClient(), config=PaCoReConfig(rounds=[2]))
    await run_dataset(graph, records[:2], out, progress=False)
    text = out.read_text()
    out.write_text(text[: len(text) - 40])  # p1's line is cut mid-way, no newline
    assert finished_ids(out) == {"p0"}
    client = FakeChatClient()
    graph = build_pacore_graph(client, config=PaCoReConfig(rounds=[2]))
    summary = await run_dataset(graph, records, out, progress=False)
    assert summary.succeeded == 2 and summary.skipped == 1
    assert finished_ids(out) == {"p0", "p1", "p2"}
    # A third run finds everything finished and calls the model zero times.
    idle = FakeChatClient()
    graph = build_pacore_graph(idle, config=PaCoReConfig(rounds=[2]))
    summary = await run_dataset(graph, records, out, progress=False)
    assert summary.skipped == 3 and idle.requests == 0
