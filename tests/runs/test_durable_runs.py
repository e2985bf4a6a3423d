"""A dataset run killed with SIGKILL, then run again: no returned sample is redone.

``pacore run --input D --output R`` runs in a subprocess against the scripted
server (real HTTP); once 80 samples have come back it is killed with SIGKILL,
then the same command runs to the end. Over both runs the server generates at
most the samples needed plus those in flight at the kill (the
``--max-concurrency`` bound), and the results file holds one line per
problem. Checked with the default SQLite store (its explorer journal,
:mod:`pacore_graph.graph.journal`) and with a real PostgreSQL server started
for the test (LangGraph's per-step checkpoints).
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import run_argv
from durable_support import (
    CHILD_ENV,
    assert_one_line_each,
    by_input,
    kill_between_responses,
    pacore_command,
    samples_returned,
    wait_for_samples,
    write_dataset,
)
from pg_support import running_postgres

from pacore_graph.runs.checkpoint import RUN_CHECKPOINT_SUFFIX
from pacore_graph.testing import ScriptedServer

REPO_ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = 20
ROUNDS = (8, 2)
CONCURRENCY = 16
NEEDED = PROBLEMS * (sum(ROUNDS) + 1)
KILL_AFTER = 80
LATENCY = 0.4


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(by_input, latency=LATENCY).run_in_thread() as srv:
        yield srv


def kill_then_rerun(srv: ScriptedServer, tmp_path: Path, checkpoint: str | None) -> dict[str, int]:
    data, out = tmp_path / "data.jsonl", tmp_path / "results.jsonl"
    write_dataset(data, PROBLEMS)
    extra = ["--checkpoint", checkpoint] if checkpoint else []
    argv = pacore_command(srv, data, out, ROUNDS, CONCURRENCY, *extra)
    proc = subprocess.Popen(
        argv, env=CHILD_ENV, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    wait_for_samples(proc, srv, KILL_AFTER, timeout_s=120)

    def kill() -> None:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)

    at_kill, in_flight = kill_between_responses(srv, kill, LATENCY)
    finished_before = len(out.read_text().splitlines()) if out.exists() else 0
    stored = _stored_rows(tmp_path / ("results.jsonl" + RUN_CHECKPOINT_SUFFIX))
    rerun = subprocess.run(
        argv, env=CHILD_ENV, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    lines = assert_one_line_each(out, PROBLEMS)
    assert all([len(r) for r in line["rounds"]] == [*ROUNDS, 1] for line in lines)
    total = samples_returned(srv)
    return {
        "at_kill": at_kill,
        "in_flight": in_flight,
        "finished_before": finished_before,
        "total": total,
        **stored,
    }


def _stored_rows(path: Path) -> dict[str, int]:
    """What the SQLite store held at the kill: journal rows and LangGraph checkpoints."""
    if not path.exists():
        return {}
    with sqlite3.connect(path) as conn:
        return {
            "journal_rows": conn.execute("SELECT COUNT(*) FROM pacore_journal").fetchone()[0],
            "checkpoint_rows": conn.execute("SELECT COUNT(*) FROM checkpoints").fetchone()[0],
        }


def test_sigkill_then_rerun_with_sqlite_redoes_only_in_flight_samples(
    server: ScriptedServer, tmp_path: Path
) -> None:
    figures = kill_then_rerun(server, tmp_path, None)
    print(f"\nSQLite: {figures} needed={NEEDED} redone={figures['total'] - NEEDED}")
    assert figures["finished_before"] < PROBLEMS  # the kill hit mid-run
    assert NEEDED <= figures["total"] <= NEEDED + figures["in_flight"]
    assert figures["in_flight"] <= CONCURRENCY
    # The default store: SQLite beside the output, its threads deleted once written.
    assert (tmp_path / ("results.jsonl" + RUN_CHECKPOINT_SUFFIX)).exists()
    # What bridged the kill is the explorer journal, not LangGraph's per-step checkpoints.
    assert figures["journal_rows"] > 0 and figures["checkpoint_rows"] == 0


def test_sigkill_then_rerun_with_postgres_redoes_only_in_flight_samples(
    server: ScriptedServer, tmp_path: Path
) -> None:
    with running_postgres() as url:
        figures = kill_then_rerun(server, tmp_path, url)
    print(f"\nPostgreSQL: {figures} needed={NEEDED} redone={figures['total'] - NEEDED}")
    assert figures["finished_before"] < PROBLEMS
    assert NEEDED <= figures["total"] <= NEEDED + figures["in_flight"]
    assert figures["in_flight"] <= CONCURRENCY
    assert not (tmp_path / ("results.jsonl" + RUN_CHECKPOINT_SUFFIX)).exists()


def test_without_checkpoints_a_kill_loses_the_unfinished_problems(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """The control: ``--checkpoint none`` redoes every unfinished problem from scratch."""
    figures = kill_then_rerun(server, tmp_path, "none")
    print(f"\nno checkpoints: {figures} needed={NEEDED} redone={figures['total'] - NEEDED}")
    assert figures["total"] > NEEDED + CONCURRENCY


# --------------------------------------------------------------------------- --checkpoint


def _eval_args(srv: ScriptedServer, data: Path, out: Path) -> list[str]:
    return [
        "eval",
        "--dataset",
        str(data),
        "--out",
        str(out),
        "--methods",
        "single",
        "--base-url",
        srv.base_url,
        "--model",
        "scripted",
        "--no-progress",
    ]


def test_checkpoint_flag_on_eval_and_run(
    server: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pacore_graph.cli import main
    from pacore_graph.runs.checkpoint import EVAL_CHECKPOINT_FILE

    data = tmp_path / "gt.jsonl"
    data.write_text(
        json.dumps(
            {
                "id": "g1",
                "messages": [{"role": "user", "content": "1+1?"}],
                "ground_truth": {"answer": "2"},
            }
        )
        + "\n"
    )
    # Default: SQLite in the output directory, under its documented name.
    assert main(_eval_args(server, data, tmp_path / "ev1")) == 0
    assert (tmp_path / "ev1" / EVAL_CHECKPOINT_FILE).exists()
    # none: no checkpoint file at all.
    assert main([*_eval_args(server, data, tmp_path / "ev2"), "--checkpoint", "none"]) == 0
    assert not (tmp_path / "ev2" / EVAL_CHECKPOINT_FILE).exists()
    # An explicit SQLite file for run --input.
    target = tmp_path / "elsewhere.sqlite"
    out = tmp_path / "r.jsonl"
    argv = run_argv(data, out, "2", "--no-progress", base_url=server.base_url, model="scripted")
    assert main([*argv, "--checkpoint", f"sqlite:///{target}"]) == 0
    assert target.exists() and not (tmp_path / ("r.jsonl" + RUN_CHECKPOINT_SUFFIX)).exists()
    capsys.readouterr()
    # A store it cannot use: one line, exit 2, nothing sent.
    before = server.request_count
    code = main([*argv[:4], str(tmp_path / "r2.jsonl"), *argv[5:], "--checkpoint", "redis://x"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--checkpoint" in err
    assert server.request_count == before
