"""Table 1 end to end: hub-format fixtures, a scripted model and judge over HTTP, ``table1.md``.

The model's answer depends only on its input: a first-round (or single, or
majority) call answers HMMT's second problem, the code problem, HLE and
MultiChallenge wrongly; a synthesis call (its prompt holds "Reference
Responses:") answers them right; HMMT's first problem is always right. Every
reply is billed 40 completion tokens, so the effective TTC of each method is
known: single 40, pacore:low 5 x 40, medium 17 x 40, high 37 x 40, and
majority voting matched to pacore:low is majority:5. The judge's verdict
depends only on whether the judged response says RIGHT. So the whole table
is known in advance, and asserted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from table1_support import fixtures, judge_reply, model_reply, parse_table

from pacore_graph.eval.code_grader import CodeGrader
from pacore_graph.eval.judge import JudgeGrader
from pacore_graph.eval.table1 import matched_majority_k, run_table1
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.testing.scripted_server import ScriptedServer

REPRODUCE_MD = Path(__file__).resolve().parents[2] / "docs" / "reproduce.md"


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ScriptedServer, ScriptedServer]]:
    with (
        ScriptedServer(model_reply, model="pacore-8b").run_in_thread() as model,
        ScriptedServer(judge_reply, model="judge").run_in_thread() as judge,
    ):
        yield model, judge


def test_table1_end_to_end(servers: tuple[ScriptedServer, ScriptedServer], tmp_path: Path) -> None:
    model, judge_server = servers
    datasets = fixtures(tmp_path / "data")

    def make_judge(cache: Path) -> JudgeGrader:
        return JudgeGrader(judge_server.base_url, "judge", cache_path=cache, backoff_s=0.0)

    async def suite() -> Path:
        client = OpenAICompatClient(model.base_url, "pacore-8b")
        try:
            with CodeGrader(workers=2) as code:
                return await run_table1(
                    client,
                    config=PaCoReConfig(),
                    out_dir=tmp_path / "out",
                    datasets=datasets,
                    code_grader=code,
                    judge=make_judge,
                )
        finally:
            await client.aclose()

    table = asyncio.run(suite()).read_text()
    rows = parse_table(table)
    # (problems, ours, interval, TTC, judge tokens, unparsed, failed, paper, paper TTC)
    hmmt = "HMMT 2025"
    assert rows[(hmmt, "single")][:4] == ["2", "50.0", "[9.5, 90.5]", "40"]
    assert rows[(hmmt, "majority:5")][:4] == ["2", "50.0", "[9.5, 90.5]", "200"]
    assert rows[(hmmt, "pacore:low")][:4] == ["2", "100.0", "[34.2, 100.0]", "200"]
    assert rows[(hmmt, "pacore:low")][-2:] == ["88.2", "243k"]
    assert rows[(hmmt, "pacore:medium")][3] == "680"
    assert rows[(hmmt, "pacore:high")][3] == "1,480"
    assert rows[(hmmt, "pacore:high")][-2:] == ["94.5", "1,796k"]
    lcb = "LiveCodeBench 2408-2505"
    assert rows[(lcb, "single")][1] == "0.0"
    assert rows[(lcb, "majority:5")][1] == "0.0"
    assert rows[(lcb, "pacore:high")][1] == "100.0"
    assert rows[(lcb, "pacore:high")][-2:] == ["78.2", "—"]
    for title in ("HLE (text)", "MultiChallenge"):
        assert rows[(title, "single")][:2] == ["1", "0.0"]
        assert rows[(title, "pacore:low")][:2] == ["1", "100.0"]
        judge_tokens = rows[(title, "pacore:low")][4]
        assert judge_tokens not in ("—", "0")  # reported, and apart from the TTC
        assert rows[(title, "pacore:low")][3] == "200"
    assert rows[("MultiChallenge", "pacore:high")][-2] == "48.0"
    assert rows[("HLE (text)", "pacore:high")][-2] == "—"  # not in our reference notes
    # HLE's image question, counted; the copy named without this machine's path
    assert "- HLE (text): test.parquet: skipped 1 image question(s)" in table.splitlines()
    assert str(tmp_path) not in table
    assert "majority:5 is matched to pacore:low" in table

    # docs/reproduce.md shows this very table ("What the end-to-end test produces").
    assert f"```markdown\n{table.rstrip()}\n```" in REPRODUCE_MD.read_text(encoding="utf-8")

    # Resumed: nothing runs again, no verdict is asked again, the table is the same.
    before = (model.request_count, judge_server.request_count)
    assert asyncio.run(suite()).read_text() == table
    assert (model.request_count, judge_server.request_count) == before


def test_matched_k_needs_both_ttcs() -> None:
    assert matched_majority_k({}, "pacore:low") is None


def test_the_example_is_the_one_command(
    servers: tuple[ScriptedServer, ScriptedServer], tmp_path: Path
) -> None:
    import subprocess
    import sys

    model, _judge = servers
    datasets = fixtures(tmp_path / "data")
    example = Path(__file__).resolve().parents[2] / "examples" / "reproduce_table1.py"
    argv = [sys.executable, str(example), "--base-url", model.base_url, "--model", "pacore-8b"]
    argv += ["--out", str(tmp_path / "out"), "--benchmarks", "hmmt25,hle"]
    argv += ["--dataset", f"hmmt25={datasets['hmmt25']}"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    table = (tmp_path / "out" / "table1.md").read_text()
    assert "| HMMT 2025 | pacore:high | 2 | 100.0 |" in table
    assert "HLE (text): left out, no judge configured" in table  # never graded by matching
