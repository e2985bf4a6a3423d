"""eval/harness: method specs and run_eval over real HTTP, resuming.

The scripted server (eval_support) answers an arithmetic problem correctly
only for some inputs, so every method gets an accuracy worked out by hand.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from eval_support import (
    ANSWERS,
    EXPECTED,
    NO_RETRY,
    PNG_MAGIC,
    PROBLEMS,
    REQUESTS_PER_RUN,
    fail_problems,
    locate,
    report,
    requested_problems,
    respond,
    result_lines,
)

from pacore_graph.eval.datasets import write_jsonl
from pacore_graph.eval.harness import EvalOutcome, run_eval
from pacore_graph.eval.methods import MethodSpec, parse_method, parse_methods
from pacore_graph.eval.report import wilson_interval
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.runs.runner import DatasetRecord, read_dataset
from pacore_graph.settings.config import MAX_ROUND_WIDTH, PaCoReConfig
from pacore_graph.testing import ScriptedServer

# --------------------------------------------------------------------------- method specs


@pytest.mark.parametrize(
    ("text", "family", "rounds", "k", "calls"),
    [
        ("pacore:low", "pacore", (4,), 1, 5),
        ("pacore:medium", "pacore", (16,), 1, 17),
        ("pacore:high", "pacore", (32, 4), 1, 37),
        ("pacore:8+2", "pacore", (8, 2), 1, 11),
        ("pacore:8,2", "pacore", (8, 2), 1, 11),
        ("pacore:3", "pacore", (3,), 1, 4),
        ("single", "single", (1,), 1, 1),
        ("majority:16", "majority", (16,), 16, 16),
        ("refine:3", "refine", (1, 1, 1), 3, 4),
        (f"majority:{MAX_ROUND_WIDTH}", "majority", (MAX_ROUND_WIDTH,), MAX_ROUND_WIDTH, 1024),
    ],
)
def test_parse_method_accepted_forms(
    text: str, family: str, rounds: tuple[int, ...], k: int, calls: int
) -> None:
    spec = parse_method(text)
    assert spec == MethodSpec(text=text, family=family, rounds=rounds, k=k)
    assert spec.expected_trajectories == calls


def test_parse_method_keeps_the_spec_as_typed_without_surrounding_space() -> None:
    assert parse_method("  majority:4 ").text == "majority:4"
    assert parse_method("pacore:8, 2").rounds == (8, 2)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("bogus", "unknown method 'bogus'"),
        ("Single", "unknown method"),
        ("single:2", "unknown method"),
        ("best-of:4", "unknown method"),
        ("pacore", "pacore:low|medium|high or pacore:8\\+2"),
        ("pacore:", "pacore:low|medium|high or pacore:8\\+2"),
        ("pacore:huge", "K must be a positive integer, got 'huge'"),
        ("pacore:8+0", r"K must be in \[1, 1024\], got 0"),
        ("pacore:2000", r"K must be in \[1, 1024\], got 2000"),
        ("majority", "K must be a positive integer, got ''"),
        ("majority:0", r"K must be in \[1, 1024\], got 0"),
        ("majority:-3", r"K must be in \[1, 1024\], got -3"),
        ("majority:x", "K must be a positive integer, got 'x'"),
        ("refine:0", r"R must be in \[1, 1024\], got 0"),
        ("refine:two", "R must be a positive integer"),
    ],
)
def test_parse_method_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_method(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("single", ["single"]),
        ("pacore:low,single,majority:4", ["pacore:low", "single", "majority:4"]),
        ("pacore:8,2,single", ["pacore:8,2", "single"]),
        ("pacore:8+2,majority:16", ["pacore:8+2", "majority:16"]),
        ("refine:2, pacore:4,2 ,single", ["refine:2", "pacore:4,2", "single"]),
    ],
)
def test_parse_methods_splits_on_commas_before_a_name(text: str, expected: list[str]) -> None:
    assert [s.text for s in parse_methods(text)] == expected


def test_parse_methods_keeps_round_widths_with_their_spec() -> None:
    first, second = parse_methods("pacore:8,2,single")
    assert (first.family, first.rounds) == ("pacore", (8, 2))
    assert (second.family, second.rounds) == ("single", (1,))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "--methods is empty"),
        (" , ", "--methods is empty"),
        ("single,single", "'single' is listed twice"),
        ("majority:4,pacore:low,majority:4", "'majority:4' is listed twice"),
        ("single,bogus", "unknown method 'bogus'"),
        ("single,majority:0", r"\[1, 1024\]"),
    ],
)
def test_parse_methods_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_methods(text)


@pytest.fixture
def records(tmp_path: Path) -> list[DatasetRecord]:
    path = tmp_path / "easy.jsonl"
    write_jsonl(PROBLEMS, path)
    found, errors = read_dataset(path)
    assert errors == [] and len(found) == 4
    return found


@asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[tuple[ScriptedServer, OpenAICompatClient]]:
    async with ScriptedServer(respond, **options) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", retry=NO_RETRY)
        try:
            yield srv, client
        finally:
            await client.aclose()


async def evaluate(
    records: list[DatasetRecord], methods: str, out: Path, *, samples: int = 1, **server: Any
) -> tuple[EvalOutcome, ScriptedServer]:
    async with serving(**server) as (srv, client):
        outcome = await run_eval(
            records,
            parse_methods(methods),
            client,
            config=PaCoReConfig(retry=NO_RETRY),
            out_dir=out,
            samples=samples,
            progress=False,
        )
    return outcome, srv


# --------------------------------------------------------------------------- run_eval


async def test_eval_accuracy_and_ttc_per_method(
    records: list[DatasetRecord], tmp_path: Path
) -> None:
    out = tmp_path / "eval"
    methods = "single,majority:3,pacore:2,pacore:2+1,refine:1"
    outcome, srv = await evaluate(records, methods, out)

    assert (outcome.ran, outcome.skipped) == (20, 0)
    assert len(srv.requests) == 4 * sum(REQUESTS_PER_RUN.values())
    assert all(r.status == 200 for r in srv.requests)

    data = report(out)
    assert list(data["methods"]) == methods.split(",")  # keyed by spec as typed, in order
    for name, stats in data["methods"].items():
        accuracy, ttc = EXPECTED[name]
        assert stats["accuracy"] == pytest.approx(accuracy), name
        assert stats["mean_ttc"] == pytest.approx(ttc), name
        assert stats["ci95"] == pytest.approx(list(wilson_interval(accuracy, 4))), name
        assert stats["ci95"][0] <= stats["accuracy"] <= stats["ci95"][1]
        assert (stats["runs"], stats["problems"], stats["samples"]) == (4, 4, 1)
        assert (stats["failures"], stats["failed_trajectories"], stats["unparsed"]) == (0, 0, 0)
        assert stats["family"] == name.split(":")[0]
        assert stats["wall_s"] is not None and stats["wall_s"] >= 0
    assert data["model"] == "scripted"
    assert (data["problems"], data["samples"]) == (4, 1)
    assert {k: s.accuracy for k, s in outcome.stats.items()} == pytest.approx(
        {k: EXPECTED[k][0] for k in methods.split(",")}
    )

    lines = result_lines(out)
    assert len(lines) == 20
    keys = {(line["method"], line["problem_id"], line["sample"]) for line in lines}
    assert keys == {(m, r.id, 0) for m in methods.split(",") for r in records}
    assert all(line["error"] is None for line in lines)
    single = {line["problem_id"]: line for line in lines if line["method"] == "single"}
    assert [single[r.id]["score"] for r in records] == [1.0, 0.0, 0.0, 1.0]
    assert single[records[1].id]["answer"] == f"The result is \\boxed{{{ANSWERS[1] + 1}}}"
    majority = [line for line in lines if line["method"] == "majority:3"]
    assert {line["result"]["extra"]["winner"] for line in majority} == {str(a + 1) for a in ANSWERS}

    md = (out / "report.md").read_text(encoding="utf-8")
    for name in methods.split(","):
        assert len(re.findall(rf"^\| {re.escape(name)} \|", md, re.M)) == 1, name
    assert "| single | 50.0% (" in md
    assert "| majority:3 | 0.0% (" in md
    assert "| pacore:2 | 75.0% (" in md

    png = (out / "scaling.png").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 1000
    assert outcome.plot == out / "scaling.png"


async def test_rerun_of_a_finished_eval_sends_nothing(
    records: list[DatasetRecord], tmp_path: Path
) -> None:
    out = tmp_path / "eval"
    await evaluate(records, "single,pacore:low", out)
    first = report(out)
    outcome, srv = await evaluate(records, "single,pacore:low", out)
    assert srv.request_count == 0
    assert (outcome.ran, outcome.skipped) == (0, 8)
    assert len(result_lines(out)) == 8
    again = report(out)
    for name in ("single", "pacore:low"):
        assert again["methods"][name]["accuracy"] == first["methods"][name]["accuracy"]
        assert again["methods"][name]["mean_ttc"] == pytest.approx(EXPECTED[name][1])
    assert again["methods"]["pacore:low"]["accuracy"] == pytest.approx(1.0)


async def test_resume_reruns_only_failed_runs(records: list[DatasetRecord], tmp_path: Path) -> None:
    out = tmp_path / "eval"
    methods = "single,pacore:2"
    outcome, srv = await evaluate(records, methods, out, fail_when=fail_problems(1, 3))

    assert all(
        r.status == 500 for r in srv.requests if locate(r.body["messages"][-1]["content"]) in (1, 3)
    )
    failed = [line for line in result_lines(out) if line["error"]]
    assert {(line["method"], line["problem_id"]) for line in failed} == {
        (m, records[p].id) for m in ("single", "pacore:2") for p in (1, 3)
    }
    assert all("500" in line["error"] for line in failed)
    data = report(out)["methods"]
    # Failed runs score 0: single is right on 0 only, pacore:2 on 0 and 2.
    assert data["single"]["accuracy"] == pytest.approx(0.25)
    assert data["pacore:2"]["accuracy"] == pytest.approx(0.5)
    assert data["single"]["failures"] == data["pacore:2"]["failures"] == 2
    assert data["single"]["runs"] == 4

    outcome, srv = await evaluate(records, methods, out)  # a healthy server now
    assert (outcome.ran, outcome.skipped) == (4, 4)
    # Only the failed problems' runs: 1 request per single run, 2 per pacore:2 run.
    assert requested_problems(srv) == [1, 1, 1, 3, 3, 3]
    assert srv.request_count == 2 * REQUESTS_PER_RUN["single"] + 2 * REQUESTS_PER_RUN["pacore:2"]
    data = report(out)["methods"]
    for name in ("single", "pacore:2"):
        accuracy, ttc = EXPECTED[name]
        assert data[name]["accuracy"] == pytest.approx(accuracy)
        assert data[name]["mean_ttc"] == pytest.approx(ttc)
        assert (data[name]["runs"], data[name]["failures"]) == (4, 0)

    outcome, srv = await evaluate(records, methods, out)
    assert srv.request_count == 0 and outcome.ran == 0


async def test_resume_after_a_cut_last_line(records: list[DatasetRecord], tmp_path: Path) -> None:
    out = tmp_path / "eval"
    methods = "single,majority:3"
    await evaluate(records, methods, out)
    path = out / "results.jsonl"
    raw = path.read_bytes()
    body, last = raw[:-1].rsplit(b"\n", 1)
    cut = json.loads(last)
    path.write_bytes(body + b"\n" + last[: len(last) // 2])  # killed while writing

    outcome, srv = await evaluate(records, methods, out)
    assert (outcome.ran, outcome.skipped) == (1, 7)
    assert srv.request_count == REQUESTS_PER_RUN[cut["method"]]
    assert requested_problems(srv) == [[r.id for r in records].index(cut["problem_id"])]
    data = report(out)["methods"]
    for name in ("single", "majority:3"):
        assert data[name]["runs"] == 4
        assert data[name]["accuracy"] == pytest.approx(EXPECTED[name][0])
        assert data[name]["mean_ttc"] == pytest.approx(EXPECTED[name][1])

    # The re-run's line survived: nothing is left to do.
    outcome, srv = await evaluate(records, methods, out)
    assert srv.request_count == 0 and outcome.ran == 0
    assert len(result_lines(out)) == 8


async def test_records_without_ground_truth_are_skipped(
    records: list[DatasetRecord], tmp_path: Path
) -> None:
    ungraded = [
        DatasetRecord(
            id="no-gt",
            messages=({"role": "user", "content": "What is the meaning of life?"},),
            line=5,
        ),
        DatasetRecord(
            id="empty-gt",
            messages=({"role": "user", "content": "Name a colour."},),
            line=6,
            ground_truth={"answer": "  "},
        ),
    ]
    out = tmp_path / "eval"
    outcome, srv = await evaluate([*records, *ungraded], "single", out)
    assert outcome.ran == 4
    assert requested_problems(srv) == [0, 1, 2, 3]  # locate() would fail on the others
    assert {line["problem_id"] for line in result_lines(out)} == {r.id for r in records}
    data = report(out)
    assert data["problems"] == 4
    assert data["methods"]["single"]["accuracy"] == pytest.approx(0.5)


async def test_no_ground_truth_at_all_is_an_error(tmp_path: Path) -> None:
    ungraded = [
        DatasetRecord(id="a", messages=({"role": "user", "content": "Hi?"},), line=1),
        DatasetRecord(
            id="b", messages=({"role": "user", "content": "Ho?"},), line=2, ground_truth={}
        ),
    ]
    out = tmp_path / "eval"
    with pytest.raises(ValueError, match="no record has a ground truth"):
        await evaluate(ungraded, "single", out)
    assert not (out / "results.jsonl").exists()


async def test_samples_give_independent_runs_per_problem(
    records: list[DatasetRecord], tmp_path: Path
) -> None:
    out = tmp_path / "eval"
    outcome, srv = await evaluate(records, "single", out, samples=2)
    assert outcome.ran == 8 and srv.request_count == 8
    lines = result_lines(out)
    assert sorted((line["problem_id"], line["sample"]) for line in lines) == sorted(
        (r.id, s) for r in records for s in (0, 1)
    )
    stats = report(out)["methods"]["single"]
    assert (stats["runs"], stats["problems"], stats["samples"]) == (8, 4, 2)
    assert stats["accuracy"] == pytest.approx(0.5)

    # More samples later: only the new sample index runs.
    outcome, srv = await evaluate(records, "single", out, samples=3)
    assert (outcome.ran, outcome.skipped) == (4, 8)
    assert srv.request_count == 4
    assert report(out)["methods"]["single"]["runs"] == 12


async def test_invalid_samples_and_methods(records: list[DatasetRecord], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="samples must be >= 1"):
        await evaluate(records, "single", tmp_path / "a", samples=0)
    async with serving() as (srv, client):
        with pytest.raises(ValueError, match="no methods"):
            await run_eval(
                records, [], client, config=PaCoReConfig(), out_dir=tmp_path / "b", progress=False
            )
        assert srv.request_count == 0
