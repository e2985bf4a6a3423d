"""``pacore eval``: method specs, the harness over real HTTP, resuming, and the CLI.

The scripted server answers an arithmetic problem correctly only for some
inputs, so every method gets a different accuracy that can be worked out by
hand (see :func:`respond`); every reply costs a fixed number of tokens, so the
mean effective TTC of each method is known too.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from pacore_graph.cli import main
from pacore_graph.eval.datasets import easy_arithmetic_problems, write_jsonl
from pacore_graph.eval.harness import EvalOutcome, run_eval
from pacore_graph.eval.methods import MethodSpec, parse_method, parse_methods
from pacore_graph.eval.report import wilson_interval
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.runs.runner import DatasetRecord, read_dataset
from pacore_graph.settings.config import MAX_ROUND_WIDTH, PaCoReConfig, RetryPolicy
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SYNTHESIS_START = "You are given a problem and a list of reference responses."
EXPLORE_TOKENS = 10
SYNTH_TOKENS = 100
NO_RETRY = RetryPolicy(max_attempts=1)

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


# --------------------------------------------------------------------------- scripted model

PROBLEMS = easy_arithmetic_problems(4, seed=0)
QUESTIONS = [p["messages"][0]["content"] for p in PROBLEMS]
ANSWERS = [int(p["ground_truth"]["answer"]) for p in PROBLEMS]
assert len(set(QUESTIONS)) == len(QUESTIONS)


def locate(text: str) -> int:
    """Which problem a prompt (a question, or a synthesis prompt quoting it) is about."""
    (index,) = [i for i, q in enumerate(QUESTIONS) if q in text]
    return index


def respond(req: ScriptedRequest) -> ScriptedReply:
    r"""Right or wrong by input only.

    An explorer (sample ``s`` of problem ``p``) is right iff ``(p + s) % 3 == 0``
    and otherwise answers ``answer + 1`` (so wrong samples agree with each
    other); a synthesis is right iff a reference holds ``\boxed{answer}``.
    Explorers cost 10 tokens, syntheses 100. Over problems 0..3 that gives:

    ========== =========================== ======== ====
    method     right on problems            accuracy TTC
    ========== =========================== ======== ====
    single     0, 3 (sample 0)              0.5      10
    majority:3 none (2 wrong votes beat 1)  0.0      30
    pacore:2   0, 2, 3 (samples 0, 1)       0.75     120
    pacore:2+1 as pacore:2, one more round  0.75     220
    refine:1   0, 3 (as single)             0.5      110
    pacore:low all (samples 0..3)           1.0      140
    ========== =========================== ======== ====
    """
    p = locate(req.last_user)
    answer = ANSWERS[p]
    if req.last_user.startswith(SYNTHESIS_START):
        right = f"\\boxed{{{answer}}}" in req.last_user
        value = answer if right else answer + 1
        return ScriptedReply(
            content=f"Having read the references: \\boxed{{{value}}}",
            reasoning="compare the references",
            completion_tokens=SYNTH_TOKENS,
        )
    value = answer if (p + req.sample_index) % 3 == 0 else answer + 1
    return ScriptedReply(
        content=f"The result is \\boxed{{{value}}}",
        reasoning="add it up",
        completion_tokens=EXPLORE_TOKENS,
    )


EXPECTED = {
    "single": (0.5, 10.0),
    "majority:3": (0.0, 30.0),
    "pacore:2": (0.75, 120.0),
    "pacore:2+1": (0.75, 220.0),
    "refine:1": (0.5, 110.0),
    "pacore:low": (1.0, 140.0),
}
REQUESTS_PER_RUN = {"single": 1, "majority:3": 1, "pacore:2": 2, "pacore:2+1": 3, "refine:1": 2}


def fail_problems(*bad: int) -> Callable[[ScriptedRequest], int | None]:
    """HTTP 500 for every request about one of the ``bad`` problems."""
    return lambda req: 500 if locate(req.last_user) in bad else None


def requested_problems(srv: ScriptedServer) -> list[int]:
    return sorted(locate(r.body["messages"][-1]["content"]) for r in srv.requests)


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


def report(out: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / "report.json").read_text(encoding="utf-8"))
    return data


def result_lines(out: Path) -> list[dict[str, Any]]:
    lines = []
    for text in (out / "results.jsonl").read_text(encoding="utf-8").splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            continue
    return lines


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


# --------------------------------------------------------------------------- CLI


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(respond).run_in_thread() as srv:
        yield srv


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "easy.jsonl"
    write_jsonl(PROBLEMS, path)
    return path


def eval_args(dataset: Path, methods: str, url: str, out: Path) -> list[str]:
    return [
        "eval",
        "--dataset",
        str(dataset),
        "--methods",
        methods,
        "--base-url",
        url,
        "--model",
        "scripted",
        "--out",
        str(out),
        "--no-progress",
        "--retries",
        "1",
    ]


OPERAND_RE = re.compile(r"What is (\d+) ([+\-×]) (\d+)\?")
MODEXP_RE = re.compile(r"remainder when (\d+)\^(\d+) .* divided by (\d+)\?")


def check_answer(question: str, answer: str) -> tuple[str, int, int]:
    """Recompute a generated problem's answer from its text; return (op, a, b)."""
    match = OPERAND_RE.search(question)
    if match:
        a, op, b = int(match[1]), match[2], int(match[3])
        expected = {"+": a + b, "-": a - b, "×": a * b}[op]
    else:
        found = MODEXP_RE.search(question)
        assert found, question
        a, b, mod = int(found[1]), int(found[2]), int(found[3])
        op, expected = "^", pow(a, b, mod)
    assert int(answer) == expected, question
    return op, a, b


def test_cli_data_arithmetic_is_reproducible(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second, other = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    for path, seed in ((first, "0"), (second, "0"), (other, "1")):
        assert main(["data", "arithmetic", "--n", "10", "--seed", seed, "--out", str(path)]) == 0
    assert f"wrote 10 arithmetic problems to {first}" in capsys.readouterr().out
    assert first.read_bytes() == second.read_bytes()
    assert first.read_bytes() != other.read_bytes()
    lines = first.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 10
    ops = []
    for text in lines:
        record = json.loads(text)
        assert set(record) >= {"id", "messages", "ground_truth"}
        op, a, b = check_answer(record["messages"][0]["content"], record["ground_truth"]["answer"])
        assert 10**11 <= a <= 10**13 and 10**11 <= b <= 10**13
        ops.append(op)
    assert set(ops) == {"+", "-", "×", "^"}
    assert len({json.loads(t)["id"] for t in lines}) == 10


def test_cli_data_easy_arithmetic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "easy.jsonl"
    assert main(["data", "easy-arithmetic", "--n", "6", "--seed", "3", "--out", str(path)]) == 0
    assert "wrote 6 easy-arithmetic problems" in capsys.readouterr().out
    records, errors = read_dataset(path)
    assert errors == [] and len(records) == 6
    for record in records:
        op, a, b = check_answer(str(record.messages[0]["content"]), record.ground_truth["answer"])
        assert op in "+-×" and 1 <= a <= 99 and 1 <= b <= 99


def test_cli_data_rejects_a_bad_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "x.jsonl"
    assert main(["data", "arithmetic", "--n", "0", "--out", str(path)]) == 2
    assert ">= 1" in capsys.readouterr().err
    assert not path.exists()


def test_cli_eval_prints_the_table_and_writes_the_files(
    server: ScriptedServer, dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "eval"
    assert main(eval_args(dataset, "single,majority:3", server.base_url, out)) == 0
    printed = capsys.readouterr().out
    assert "# Evaluation report" in printed
    assert re.search(r"^\| single \| 50\.0% \(", printed, re.M)
    assert re.search(r"^\| majority:3 \| 0\.0% \(", printed, re.M)
    assert f"wrote {out / 'report.json'}" in printed
    assert server.request_count == 8
    for name in ("results.jsonl", "report.json", "report.md", "scaling.png"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "scaling.png").read_bytes().startswith(PNG_MAGIC)
    data = report(out)
    assert data["dataset"] == str(dataset)
    assert data["methods"]["single"]["accuracy"] == pytest.approx(0.5)
    assert data["methods"]["majority:3"]["mean_ttc"] == pytest.approx(30.0)


def test_cli_eval_samples(
    server: ScriptedServer, dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "eval"
    assert main([*eval_args(dataset, "single", server.base_url, out), "--samples", "2"]) == 0
    assert "| single | 50.0% (" in capsys.readouterr().out
    assert len(result_lines(out)) == 8
    stats = report(out)["methods"]["single"]
    assert (stats["runs"], stats["samples"]) == (8, 2)


@pytest.mark.parametrize(
    ("methods", "message"),
    [
        ("single,bogus:3", "unknown method 'bogus:3'"),
        ("majority:0", r"\[1, 1024\]"),
        ("single,single", "listed twice"),
    ],
)
def test_cli_eval_bad_methods_exit_2(
    server: ScriptedServer,
    dataset: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    methods: str,
    message: str,
) -> None:
    assert main(eval_args(dataset, methods, server.base_url, tmp_path / "eval")) == 2
    err = capsys.readouterr().err
    assert err.startswith("pacore: error:")
    assert re.search(message, err)
    assert server.request_count == 0


def test_cli_eval_missing_dataset_exits_2(
    server: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.jsonl"
    assert main(eval_args(missing, "single", server.base_url, tmp_path / "eval")) == 2
    assert f"--dataset {missing}: no such file" in capsys.readouterr().err
    assert server.request_count == 0


def test_cli_eval_without_ground_truth_exits_2(
    server: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ungraded.jsonl"
    write_jsonl([{"id": "q", "messages": [{"role": "user", "content": "Hi?"}]}], path)
    assert main(eval_args(path, "single", server.base_url, tmp_path / "eval")) == 2
    assert "no record has a ground truth" in capsys.readouterr().err
    assert server.request_count == 0
