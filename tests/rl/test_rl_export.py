"""``pacore export-episodes``: episodes from results files, as JSONL, Parquet or a dataset.

The results come from real graph runs against the arithmetic fake of
``rl_support`` (one explorer per problem fails), so the counts below are
derived from its problems and width.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rl_support import (
    PROBLEMS,
    WIDTH,
    make_eval_results,
    make_run_results,
    require_extra,
    write_logprob_run,
)

from pacore_graph.rl.episodes import Episode, episodes_from_run, read_result_runs
from pacore_graph.rl.export import (
    EXPORT_FORMATS,
    export_command,
    export_episodes,
    load_episode_dataset,
)


async def test_export_jsonl_counts_failures_and_skips_bad_lines(tmp_path: Path) -> None:
    results, _client = await make_run_results(tmp_path)
    with open(results, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"request_id": "bad", "error": "RoundFailedError: boom"}) + "\n")
        fh.write('{"request_id": "cut", "rounds": [[{"rou\n')
    out = tmp_path / "episodes"
    printed: list[str] = []

    class Sink:
        def write(self, text: str) -> int:
            printed.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    report = export_command(results, out, "jsonl", stream=Sink())  # type: ignore[arg-type]
    assert report.runs == len(PROBLEMS) and report.lines == len(PROBLEMS) + 2
    assert report.episodes == len(PROBLEMS) * WIDTH
    assert report.failed_trajectories == len(PROBLEMS)
    assert report.skipped_lines == 2
    assert any("run failed" in r for r in report.skip_reasons)
    assert any("not valid JSON" in r for r in report.skip_reasons)
    assert report.episodes_per_round == ((0, 3 * len(PROBLEMS)), (1, len(PROBLEMS)))
    # round 0: seeds 0 and 2 right, 3 wrong; the synthesis is right: 3 of 4 per problem
    assert report.mean_reward == pytest.approx(0.75)
    assert "exported 12 episodes from 3 runs" in "".join(printed)
    rows = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(rows) == report.episodes
    assert all(isinstance(r["prompt"], list) and r["prompt"][-1]["role"] == "user" for r in rows)
    saved = json.loads((out / "export_report.json").read_text())
    assert saved["episodes"] == report.episodes and saved["failed_trajectories"] == 3


async def test_export_reads_eval_results(tmp_path: Path) -> None:
    results = await make_eval_results(tmp_path)
    report = export_episodes(results, tmp_path / "out", "jsonl")
    rows = [json.loads(x) for x in (tmp_path / "out" / "episodes.jsonl").read_text().splitlines()]
    by_method: dict[str, set[int]] = {}
    for row in rows:
        by_method.setdefault(row["method"], set()).add(row["sample"])
    assert by_method == {"pacore:3": {0, 1}, "single": {0, 1}}
    # pacore:3 = 3 explorers (seed 1 fails) + 1 synthesis; single = 1 explorer (seed 0)
    per_problem = {"pacore:3": 3, "single": 1}
    for method, n in per_problem.items():
        assert sum(r["method"] == method for r in rows) == n * 2 * len(PROBLEMS)
    assert report.failed_trajectories == 2 * len(PROBLEMS)  # pacore:3 only
    assert {r["run_id"] for r in rows if r["method"] == "single"}.isdisjoint(
        {r["run_id"] for r in rows if r["method"] == "pacore:3"}
    )


def test_export_rejects_bad_arguments_before_writing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        export_episodes(tmp_path / "missing.jsonl", tmp_path / "out")
    results = tmp_path / "results.jsonl"
    write_logprob_run(results)
    with pytest.raises(ValueError, match="format"):
        export_episodes(results, tmp_path / "out", "csv")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
async def test_export_loads_with_datasets(tmp_path: Path, fmt: str) -> None:
    require_extra("datasets", "pyarrow")
    from datasets import load_dataset, load_from_disk

    results, _client = await make_run_results(tmp_path)
    write_logprob_run(tmp_path / "lp.jsonl")
    out = tmp_path / fmt
    report = export_episodes([results, tmp_path / "lp.jsonl"], out, fmt)
    if fmt == "jsonl":
        ds = load_dataset("json", data_files=str(out / "episodes.jsonl"), split="train")
    elif fmt == "parquet":
        ds = load_dataset("parquet", data_files=str(out / "episodes.parquet"), split="train")
    else:
        ds = load_from_disk(str(out))
    assert len(ds) == report.episodes == len(PROBLEMS) * WIDTH + 2
    assert {"problem_id", "round", "prompt", "completion", "message", "reward"} <= set(
        ds.column_names
    )
    # every row comes back as the episode it was written from
    runs = read_result_runs(results)[0] + read_result_runs(tmp_path / "lp.jsonl")[0]
    expected = {e.episode_id: e for run in runs for e in episodes_from_run(run)}
    loaded = {row["episode_id"]: Episode.from_row(row) for row in ds}
    assert loaded == expected
    again = load_episode_dataset(out)
    assert len(again) == len(ds)
