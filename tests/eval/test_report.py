"""Eval report: per-method arithmetic on scripted result lines, report files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from report_support import LINES, META, STAT_KEYS, TOL, WALL, M, P, S, run

from pacore_graph.eval.report import (
    MethodStats,
    dataset_label,
    mean_interval,
    report_json,
    report_markdown,
    summarize,
    wilson_interval,
    write_report,
)


@pytest.fixture
def stats() -> dict[str, MethodStats]:
    return summarize(iter(LINES), wall_s=WALL)


# --------------------------------------------------------------------------- intervals


def test_wilson_known_values() -> None:
    # 8/10: the textbook example, [0.4902, 0.9433].
    lo, hi = wilson_interval(0.8, 10)
    assert lo == pytest.approx(0.4902, abs=5e-5)
    assert hi == pytest.approx(0.9433, abs=5e-5)
    # 0/10 does not collapse to [0, 0] (Wald would): upper = z²/(n+z²) = 3.8416/13.8416.
    lo, hi = wilson_interval(0.0, 10)
    assert lo == 0.0
    assert hi == pytest.approx(3.8416 / 13.8416, abs=TOL)
    # 1/1: centre (1 + 1.9208)/4.8416, half 1.96·sqrt(0.9604)/4.8416 = 1.9208/4.8416.
    lo, hi = wilson_interval(1.0, 1)
    assert lo == pytest.approx(1.0 / 4.8416, abs=TOL)  # 0.20654...
    assert hi == pytest.approx(1.0, abs=TOL)
    assert wilson_interval(0.5, 0) == (0.0, 1.0)


def test_mean_interval_degenerate_and_clipped() -> None:
    assert mean_interval([]) == (0.0, 1.0)
    assert mean_interval([0.75]) == (0.0, 1.0)  # P=1: no spread to measure, no ZeroDivision
    # [0, 1]: mean .5, sd sqrt(.5), sd/√2 = .5, half .98 -> [-.48, 1.48] clipped.
    assert mean_interval([0.0, 1.0]) == (0.0, 1.0)
    # Identical per-problem means: zero spread, zero width.
    assert mean_interval([0.5, 0.5, 0.5]) == pytest.approx((0.5, 0.5), abs=TOL)


# --------------------------------------------------------------------------- summarize


def test_first_seen_order_and_method_order(stats: dict[str, MethodStats]) -> None:
    assert list(stats) == [M, S, P]
    ordered = summarize(LINES, method_order=[P, S, M])
    assert list(ordered) == [P, S, M]
    # Methods not listed are appended in first-seen order; listed ones with no lines are left out.
    partial = summarize(LINES, method_order=[S, "refine:2", S])
    assert list(partial) == [S, M, P]


def test_single_sample_method_uses_wilson(stats: dict[str, MethodStats]) -> None:
    s = stats[S]
    assert (s.method, s.family, s.runs, s.problems, s.samples) == (S, "single", 4, 4, 1)
    assert s.accuracy == pytest.approx(0.75, abs=TOL)  # 3 of 4 (e1 unparsed scores 0)
    # Wilson, p=.75, n=4, z=1.96: z²/n = .9604, denominator 1.9604,
    # centre (.75 + .4802)/1.9604 = 1.2302/1.9604,
    # half 1.96·sqrt(.1875/4 + 3.8416/64)/1.9604 = 1.96·sqrt(.1069)/1.9604
    # -> [0.300637, 0.954414]
    half = 1.96 * math.sqrt(0.1069)
    assert s.ci95[0] == pytest.approx((1.2302 - half) / 1.9604, abs=TOL)
    assert s.ci95[1] == pytest.approx((1.2302 + half) / 1.9604, abs=TOL)
    assert s.ci95 == pytest.approx((0.300637, 0.954414), abs=1e-6)
    assert s.mean_ttc == pytest.approx((100 + 120 + 90 + 110) / 4, abs=TOL)  # 105
    assert s.mean_wall_s == pytest.approx((1.0 + 1.2 + 0.9 + 1.1) / 4, abs=TOL)  # 1.05
    assert (s.failures, s.failed_trajectories, s.truncations, s.unparsed) == (0, 0, 1, 1)
    assert s.wall_s == 10.0


def test_multi_sample_method_with_failure_and_resume(stats: dict[str, MethodStats]) -> None:
    m = stats[M]
    # 8 runs after the stale (e2, 0) line is replaced by the resumed one.
    assert (m.method, m.family, m.runs, m.problems, m.samples) == (M, "majority", 8, 4, 2)
    # Per-problem means: e0 (1+1)/2 = 1, e1 (0 failed + 1)/2 = .5, e2 (0 resumed + 1)/2 = .5,
    # e3 1 -> accuracy (1 + .5 + .5 + 1)/4 = .75.
    assert m.accuracy == pytest.approx(0.75, abs=TOL)
    # sd (ddof=1) of [1, .5, .5, 1] = sqrt(4·.25²/3) = sqrt(1/12); sd/√4 = sqrt(1/48);
    # half = 1.96·sqrt(1/48) = 0.282902 -> [0.467098, 1.032902] clipped to 1.
    assert m.ci95[0] == pytest.approx(0.75 - 1.96 * math.sqrt(1 / 48), abs=TOL)
    assert m.ci95[1] == 1.0
    # TTC per run: (400 + 420 + 0 + 380 + 440 + 460 + 410 + 390)/8 = 2900/8 = 362.5
    # (the stale 500 is gone).
    assert m.mean_ttc == pytest.approx(362.5, abs=TOL)
    # wall: (2.0 + 2.2 + 0.5 + 1.8 + 2.1 + 2.3 + 2.0 + 1.9)/8 = 14.8/8 = 1.85
    assert m.mean_wall_s == pytest.approx(1.85, abs=TOL)
    assert m.failures == 1
    assert m.failed_trajectories == 1 + 5
    assert m.truncations == 1 + 1  # e0/1 and the resumed e2/0; the stale line's 7 is gone
    assert m.unparsed == 0  # the failed run's parsed=false counts as a failure only
    assert m.wall_s == 30.5


def test_three_samples_interval(stats: dict[str, MethodStats]) -> None:
    p = stats[P]
    assert (p.runs, p.problems, p.samples, p.family) == (6, 2, 3, "pacore")
    # e0: 2/3, e1: 1/3 -> accuracy .5; sd (ddof=1) = sqrt(2·(1/6)²) = sqrt(1/18);
    # sd/√2 = 1/6; half = 1.96/6 -> [0.173333, 0.826667].
    assert p.accuracy == pytest.approx(0.5, abs=TOL)
    assert p.ci95[0] == pytest.approx(0.5 - 1.96 / 6, abs=TOL)
    assert p.ci95[1] == pytest.approx(0.5 + 1.96 / 6, abs=TOL)
    # (1000 + 1200 + 1100 + 900 + 1300 + 1500)/6 = 7000/6
    assert p.mean_ttc == pytest.approx(7000 / 6, abs=TOL)
    assert p.mean_wall_s == pytest.approx(35.0 / 6, abs=TOL)
    assert p.truncations == 2
    assert p.wall_s is None  # not in WALL


def test_pass_at_1_weighs_problems_not_runs() -> None:
    # e0 has 3 samples all right, e1 one wrong sample (interrupted): per run .75, per problem .5.
    lines = [run(S, "e0", i, 1.0) for i in range(3)] + [run(S, "e1", 0, 0.0)]
    s = summarize(lines)[S]
    assert s.accuracy == pytest.approx(0.5, abs=TOL)
    assert s.samples == 3
    assert s.ci95 == (0.0, 1.0)  # [1, 0]: half 1.96·sqrt(.5)/sqrt(2) = .98, clipped both sides


def test_single_problem_intervals_do_not_divide_by_zero() -> None:
    many = summarize([run(S, "only", i, 1.0) for i in range(4)])[S]
    assert (many.problems, many.samples, many.accuracy) == (1, 4, 1.0)
    assert many.ci95 == (0.0, 1.0)
    one = summarize([run(S, "only", 0, 1.0)])[S]
    assert one.ci95 == pytest.approx((1.0 / 4.8416, 1.0), abs=TOL)  # Wilson 1/1


def test_error_forces_score_zero_and_defaults() -> None:
    lines = [
        run("x:1", "a", 0, 1.0, error="timeout"),
        {"method": "x:1", "problem_id": "b"},  # bare line: sample 0, score 0, parsed, no error
    ]
    s = summarize(lines)["x:1"]
    assert s.accuracy == 0.0
    assert (s.failures, s.unparsed, s.runs, s.problems) == (1, 0, 2, 2)
    assert s.family == "x"
    assert s.mean_ttc == 0.0
    assert s.wall_s is None


def test_missing_keys_raise() -> None:
    with pytest.raises(ValueError, match="problem_id"):
        summarize([{"method": S, "score": 1.0}])
    assert summarize([]) == {}


# --------------------------------------------------------------------------- report files


def test_report_json_shape(stats: dict[str, MethodStats]) -> None:
    doc = report_json(stats, meta=META)
    assert set(doc) == {"methods", *META}
    assert doc["model"] == "smollm2-135m"
    assert list(doc["methods"]) == [M, S, P]
    for name, entry in doc["methods"].items():
        assert set(entry) == STAT_KEYS, name
        assert isinstance(entry["ci95"], list)
        assert len(entry["ci95"]) == 2
    entry = doc["methods"][M]
    assert entry["accuracy"] == pytest.approx(0.75, abs=TOL)
    assert entry["ci95"][1] == 1.0
    assert entry["mean_ttc"] == pytest.approx(362.5, abs=TOL)
    assert entry["family"] == "majority"
    assert (entry["runs"], entry["problems"], entry["samples"]) == (8, 4, 2)
    assert doc["methods"][P]["wall_s"] is None
    json.dumps(doc, allow_nan=False)  # strictly serialisable
    with pytest.raises(ValueError, match="methods"):
        report_json(stats, meta={"methods": "x"})


def test_report_markdown_rows(stats: dict[str, MethodStats]) -> None:
    md = report_markdown(stats, meta=META)
    lines = md.splitlines()
    assert lines[0].startswith("# ")
    assert "- **dataset**: easy.jsonl" in lines
    header = next(i for i, line in enumerate(lines) if line.startswith("| method |"))
    for column in ("accuracy (95% CI)", "mean effective TTC", "runs", "failures", "truncated"):
        assert column in lines[header]
    assert "unparsed" in lines[header]
    assert "wall" in lines[header]
    rows = [line for line in lines[header + 2 :] if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows] == [f"| {M}", f"| {S}", f"| {P}"]
    cells = {row.split(" | ")[0][2:]: row.strip("| ").split(" | ") for row in rows}
    assert cells[S][1] == "75.0% (30.1–95.4)"
    assert cells[M][1] == "75.0% (46.7–100.0)"
    assert cells[P][1] == "50.0% (17.3–82.7)"
    assert cells[M][2] == "362"  # 362.5, banker's rounding
    assert cells[P][2] == "1,167"
    assert cells[M][3] == "8 (4×2)"
    assert cells[M][4] == "1 (6 traj.)"
    assert cells[S][5:7] == ["1", "1"]
    assert cells[S][7] == "10.0 s"
    assert cells[M][7] == "30.5 s"
    assert cells[P][7] == "—"
    assert all(len(c) == 8 for c in cells.values())


def test_markdown_escapes_pipes_and_handles_empty() -> None:
    s = summarize([run("weird|spec", "a", 0, 1.0, family="weird")])
    md = report_markdown(s, meta={})
    assert "| weird\\|spec |" in md
    assert "No results." in report_markdown({}, meta={})


def test_write_report(tmp_path: Path, stats: dict[str, MethodStats]) -> None:
    json_path, md_path = write_report(tmp_path / "out", stats, META)
    assert (json_path.name, md_path.name) == ("report.json", "report.md")
    assert json.loads(json_path.read_text(encoding="utf-8")) == json.loads(
        json.dumps(report_json(stats, meta=META))
    )
    assert md_path.read_text(encoding="utf-8") == report_markdown(stats, meta=META)
    assert sorted(p.name for p in json_path.parent.iterdir()) == ["report.json", "report.md"]


def test_dataset_label_keeps_no_path_of_the_machine(tmp_path: Path) -> None:
    assert dataset_label("easy100.jsonl") == "easy100.jsonl"  # as typed: relative
    assert dataset_label("data/easy.jsonl") == "data/easy.jsonl"
    assert dataset_label(tmp_path / "sub" / "easy.jsonl", cwd=tmp_path) == "sub/easy.jsonl"
    assert dataset_label("/tmp/realeval/easy100.jsonl", cwd=tmp_path) == "easy100.jsonl"


def test_report_markdown_names_the_dataset_without_a_temporary_path(
    stats: dict[str, MethodStats],
) -> None:
    meta = {**META, "dataset": "/tmp/realeval/easy100.jsonl"}
    md = report_markdown(stats, meta=meta)
    assert "- **dataset**: easy100.jsonl" in md.splitlines()
    assert "/tmp/" not in md
    # report.json is for programs: it keeps the path as it was given.
    assert report_json(stats, meta=meta)["dataset"] == "/tmp/realeval/easy100.jsonl"


def test_judge_tokens_are_numbers_in_json_and_a_sentence_in_markdown(
    stats: dict[str, MethodStats],
) -> None:
    meta = {**META, "judge_tokens": 1234, "judge_verdicts": 5}
    data = report_json(stats, meta=meta)
    assert (data["judge_tokens"], data["judge_verdicts"]) == (1234, 5)
    lines = report_markdown(stats, meta=meta).splitlines()
    assert "- **judge_tokens**: 1234 over 5 verdicts (not in effective TTC)" in lines
    assert not [line for line in lines if "judge_verdicts" in line]
