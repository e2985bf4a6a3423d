"""load_dataset_spec: every form of dataset argument into records, and what is left out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hub_fixtures import (
    go_offline,
    gpqa_row,
    hle_row,
    matharena_row,
    multichallenge_row,
    seed_hub_cache,
    write_parquet,
)

from pacore_graph.eval.benchmarks.base import DatasetError, HubDataset
from pacore_graph.eval.datasets_load import GENERIC, detect_benchmark, load_dataset_spec


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    go_offline(monkeypatch)


def test_our_jsonl_format_is_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(
        json.dumps({"id": "a", "question": "1+1?", "ground_truth": {"answer": "2"}})
        + "\nnot json\n",
        encoding="utf-8",
    )
    loaded = load_dataset_spec(str(path))
    assert [r.id for r in loaded.records] == ["a"]
    assert [e.line for e in loaded.input_errors] == [2]
    assert loaded.input_errors[0].reason.startswith("not valid JSON")
    assert (loaded.source, loaded.benchmark) == (str(path), None)
    with pytest.raises(DatasetError, match="apply to a dated benchmark only"):
        from datetime import date

        load_dataset_spec(str(path), since=date(2024, 1, 1))


def test_a_jsonl_record_with_more_tests_than_the_cap_is_a_bad_line(tmp_path: Path) -> None:
    """Issue 31 (low): the line is named, the other records load."""
    one = {"input": "1", "output": "1", "testtype": "stdin"}
    rows = [
        {"id": "many", "question": "q", "ground_truth": {"code_tests": {"tests": [one] * 10_001}}},
        {"id": "fine", "question": "q", "ground_truth": {"code_tests": {"tests": [one]}}},
    ]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    loaded = load_dataset_spec(str(path))
    assert [r.id for r in loaded.records] == ["fine"]
    assert [str(e) for e in loaded.input_errors] == [
        "line 1: code tests: 10001 tests: more than 10000 per problem"
    ]


def test_a_hub_format_file_gets_its_benchmark_by_columns(tmp_path: Path) -> None:
    rows = [hle_row("q1", "Q?", "1"), hle_row("q2", "Pic?", "2", image="data:image/png;base64,AA")]
    loaded = load_dataset_spec(str(write_parquet(rows, tmp_path / "test-00000.parquet")))
    assert loaded.benchmark == "hle"
    assert [r.id for r in loaded.records] == ["q1"] and loaded.skipped == {"image question": 1}


def test_other_layouts_take_the_generic_map(tmp_path: Path) -> None:
    rows = [
        {"problem": "2+2?", "prompt": None, "answer": 4, "category": None},
        {"problem": None, "prompt": "3+3?", "answer": 6, "category": "numeric"},
    ]
    loaded = load_dataset_spec(str(write_parquet(rows, tmp_path / "g.parquet")))
    first, second = loaded.records
    assert (first.id, first.ground_truth, first.messages[0]["content"]) == (
        "row-1",
        {"answer": 4},
        "2+2?",
    )
    assert second.raw["category"] == "numeric" and loaded.benchmark is None


def test_duplicate_ids_are_a_row_error(tmp_path: Path) -> None:
    path = write_parquet(
        [matharena_row(1, "A", "1"), matharena_row(1, "B", "2")], tmp_path / "d.parquet"
    )
    with pytest.raises(DatasetError, match=r"row 2 \(id 1\): duplicate id 'hmmt25-1'"):
        load_dataset_spec(f"hmmt25:{path}")


def test_a_row_with_no_problem_text_is_an_error(tmp_path: Path) -> None:
    path = write_parquet([{"id": "x", "answer": "1"}], tmp_path / "n.parquet")
    with pytest.raises(DatasetError, match=r"row 1 \(id x\): no 'messages' list"):
        load_dataset_spec(str(path))


_READ = """
import json, sys
from pacore_graph.eval.benchmarks.base import DatasetError
from pacore_graph.eval.datasets_load import load_dataset_spec
for spec in sys.argv[1:]:
    try:
        loaded = load_dataset_spec(spec)
    except DatasetError as exc:
        print(json.dumps({"error": str(exc)}))
    else:
        print(json.dumps({"ids": [r.id for r in loaded.records], "benchmark": loaded.benchmark,
                          "source": loaded.source}))
"""


def _read_offline(specs: list[str], cache: Path, home: Path) -> list[dict[str, object]]:
    """Load each spec in one fresh interpreter: offline, the datasets cache at ``cache``."""
    env = {
        **os.environ,
        "HF_HOME": str(home),
        "HF_DATASETS_CACHE": str(cache),
        "HF_DATASETS_OFFLINE": "1",
        "HF_HUB_OFFLINE": "1",
    }
    proc = subprocess.run(
        [sys.executable, "-c", _READ, *specs], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return [json.loads(line) for line in lines]


def test_hub_ids_and_names_load_offline_from_the_cache(tmp_path: Path) -> None:
    """``hf:OWNER/NAME`` and ``hmmt25`` go through ``datasets.load_dataset``; nothing fetched."""
    rows = [matharena_row(1, "Compute 1+1.", "2"), matharena_row(2, "Compute 2+2.", "4")]
    cache = tmp_path / "datasets-cache"
    seed_hub_cache(rows, "MathArena/hmmt_feb_2025", cache, split="train")
    by_id, by_name, missing = _read_offline(
        ["hf:MathArena/hmmt_feb_2025@train", "hmmt25", "hf:nobody/nothing"],
        cache,
        tmp_path / "home",
    )
    assert by_id == {
        "ids": ["hmmt25-1", "hmmt25-2"],
        "benchmark": "hmmt25",
        "source": "hf:MathArena/hmmt_feb_2025@train",
    }
    assert by_name["ids"] == ["hmmt25-1", "hmmt25-2"]
    error = str(missing["error"])
    assert error.startswith("hf:nobody/nothing: cannot load (") and "\n" not in error


def test_a_hub_id_is_read_by_its_own_benchmark_before_its_columns(tmp_path: Path) -> None:
    """AIME 2025 has HMMT's columns: by its hub id it is still aime25 (ids, report name)."""
    rows = [matharena_row(1, "Compute 1+1.", "2"), matharena_row(2, "Compute 2+2.", "4")]
    cache = tmp_path / "datasets-cache"
    seed_hub_cache(rows, "MathArena/aime_2025", cache, split="train")
    by_id, by_name = _read_offline(["hf:MathArena/aime_2025", "aime25"], cache, tmp_path / "home")
    expected = ["aime25-1", "aime25-2"]
    assert (by_id["ids"], by_id["benchmark"]) == (expected, "aime25")
    assert (by_name["ids"], by_name["benchmark"]) == (expected, "aime25")
    assert by_name["source"] == "hf:MathArena/aime_2025@train"


def test_detect_benchmark_asks_the_repository_first_then_the_columns() -> None:
    columns = ["problem_idx", "problem", "answer", "problem_type"]
    assert detect_benchmark(columns, HubDataset("MathArena/aime_2025")).name == "aime25"
    assert detect_benchmark(columns, HubDataset("matharena/AIME_2025", "default")).name == "aime25"
    assert detect_benchmark(columns, HubDataset("someone/aime-copy")).name == "hmmt25"
    assert detect_benchmark(columns).name == "hmmt25"  # a local copy: columns only
    gpqa = ["Question", "Correct Answer", "Record ID"]
    found = detect_benchmark(gpqa, HubDataset("Idavidrein/gpqa", "gpqa_diamond"))
    assert found.name == "gpqa-diamond"
    # another config of the repository is not GPQA Diamond, and these columns fit nothing
    assert detect_benchmark(gpqa, HubDataset("Idavidrein/gpqa", "gpqa_main")) is GENERIC


_HUB_DEFAULTS = {
    # name: (hub repo, config, split, rows in the hub's own columns, ids, other spec)
    "aime25": (
        "MathArena/aime_2025",
        "default",
        "train",
        [matharena_row(7, "Compute 3+4.", 7, ("Number Theory",))],
        ["aime25-7"],
        "hf:MathArena/aime_2025@train",
    ),
    "hle": (
        "cais/hle",
        "default",
        "test",
        [
            hle_row("q-text", "Name the answer.", "Answerville"),
            hle_row("q-mc", "Pick one.", "B", mc=True),
            hle_row("q-pic", "What is shown?", "a cat", image="data:image/png;base64,AA"),
        ],
        ["q-text", "q-mc"],
        "hf:cais/hle@test",
    ),
    "gpqa-diamond": (
        "Idavidrein/gpqa",
        "gpqa_diamond",
        "train",
        [gpqa_row("recA1", "Which particle?", "muon", ["pion", "kaon", "tau"])],
        ["recA1"],
        "hf:Idavidrein/gpqa:gpqa_diamond",
    ),
    "multichallenge": (
        "nmayorga7/multichallenge",
        "default",
        "train",
        [
            multichallenge_row(
                "mc-1",
                [("user", "I am vegan."), ("assistant", "Noted."), ("user", "A dinner idea?")],
                "Is the dinner vegan?",
                "YES",
            )
        ],
        ["mc-1"],
        "hf:nmayorga7/multichallenge@train",
    ),
}


@pytest.mark.parametrize("name", list(_HUB_DEFAULTS))
def test_named_benchmarks_load_from_their_hub_defaults(tmp_path: Path, name: str) -> None:
    """``NAME`` reads the benchmark's own repository, config and split from the hub cache."""
    repo, config, split, rows, ids, hub_spec = _HUB_DEFAULTS[name]
    cache = tmp_path / "datasets-cache"
    seed_hub_cache(rows, repo, cache, split=split, config=config)
    by_name, by_id = _read_offline([name, hub_spec], cache, tmp_path / "home")
    assert (by_name["ids"], by_name["benchmark"]) == (ids, name), by_name
    assert (by_id["ids"], by_id["benchmark"]) == (ids, name), by_id
    where = f"hf:{repo}" + (f":{config}" if config != "default" else "") + f"@{split}"
    assert by_name["source"] == where
