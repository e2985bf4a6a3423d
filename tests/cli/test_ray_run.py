"""cli/ray_run: ``pacore run --input`` and ``pacore eval`` over a local two-worker Ray cluster.

``pacore run --input ... --ray local --ray-workers 2`` (and ``pacore eval``) runs as users run it,
against the scripted server over loopback; mid-run it SIGKILLs one of the Ray
worker processes running a share. Ray runs that share again, which resumes
from its checkpoints: every problem gets one line, and the samples asked again
are at most those in flight in the killed worker. The plan and the merge are
runs/ray_cluster's (tests/runs/test_ray_cluster.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pacore_graph.testing import ScriptedServer
from tests.cli_support import run_argv
from tests.durable_support import (
    by_input,
    kill_between_responses,
    samples_returned,
    wait_until,
    write_dataset,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = 24
ROUNDS = (8, 2)
CONCURRENCY = 8  # per task
NEEDED = PROBLEMS * (sum(ROUNDS) + 1)
LATENCY = 0.4


def _share_workers() -> list[int]:
    """Ray worker processes running a share now (Ray titles them ``ray::_call``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cmdline.startswith(b"ray::_call"):
            found.append(int(entry.name))
    return found


def _sharing(srv: ScriptedServer, needed: int) -> bool:
    """A quarter of the samples back and both share workers running: time to kill one."""
    return samples_returned(srv) >= needed // 4 and len(_share_workers()) >= 2


def _kill_a_share_worker() -> None:
    os.kill(_share_workers()[0], signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_worker_is_rerun_and_resumes_from_its_checkpoints(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    data, out = tmp_path / "data.jsonl", tmp_path / "results.jsonl"
    write_dataset(data, PROBLEMS)
    with ScriptedServer(by_input, latency=LATENCY).run_in_thread() as srv:
        argv = [
            sys.executable,
            "-m",
            "pacore_graph.cli",
            *run_argv(
                data,
                out,
                ",".join(map(str, ROUNDS)),
                "--max-concurrency",
                str(CONCURRENCY),
                "--ray",
                "local",
                "--ray-workers",
                "2",
                base_url=srv.base_url,
                model="scripted",
            ),
        ]
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        proc = subprocess.Popen(
            argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        wait_until(proc, lambda: _sharing(srv, NEEDED), timeout_s=240, what="the run")
        at_kill, in_flight = kill_between_responses(srv, _kill_a_share_worker, LATENCY)
        stdout, stderr = proc.communicate(timeout=300)
        total = samples_returned(srv)
    assert proc.returncode == 0, stderr[-3000:]
    assert b"ray_tasks=2" in stdout
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["request_id"] for line in lines) == sorted(f"q{i}" for i in range(PROBLEMS))
    assert all(not line.get("error") for line in lines)
    assert all([len(r) for r in line["rounds"]] == [*ROUNDS, 1] for line in lines)
    print(f"\nRay: needed={NEEDED} total={total} in_flight={in_flight} at_kill={at_kill}")
    assert NEEDED <= total <= NEEDED + in_flight  # only what was in flight is asked again
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert leftovers == ["data.jsonl", "results.jsonl"]  # the share files are merged away


EVAL_PROBLEMS = 16
EVAL_METHODS = ("single", "pacore:8+2")
EVAL_NEEDED = EVAL_PROBLEMS * (1 + (8 + 2 + 1))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_eval_over_ray_survives_a_killed_worker_merges_every_run_and_reports(
    tmp_path: Path,
) -> None:
    """``pacore eval --ray local``: one of the two share workers is SIGKILLed mid-run; Ray runs
    its share again, which resumes from its checkpoints (issue 22 part 4)."""
    pytest.importorskip("ray")
    data = tmp_path / "data.jsonl"
    with data.open("w") as fh:
        for i in range(EVAL_PROBLEMS):
            q = {"role": "user", "content": f"What is {i} + {i}?"}
            fh.write(json.dumps({"id": f"q{i}", "messages": [q], "ground_truth": str(2 * i)}))
            fh.write("\n")
    out = tmp_path / "ev"
    with ScriptedServer(by_input, latency=LATENCY).run_in_thread() as srv:
        argv = [sys.executable, "-m", "pacore_graph.cli", "eval", "--dataset", str(data)]
        argv += ["--methods", ",".join(EVAL_METHODS), "--out", str(out), "--no-progress"]
        argv += ["--base-url", srv.base_url, "--model", "scripted"]
        argv += ["--max-concurrency", str(CONCURRENCY), "--ray", "local", "--ray-workers", "2"]
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        proc = subprocess.Popen(
            argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        wait_until(proc, lambda: _sharing(srv, EVAL_NEEDED), timeout_s=240, what="the eval")
        _, in_flight = kill_between_responses(srv, _kill_a_share_worker, LATENCY)
        _, stderr = proc.communicate(timeout=400)
        total = samples_returned(srv)
    assert proc.returncode == 0, stderr[-3000:]
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    keys = sorted((line["method"], line["problem_id"]) for line in lines)
    assert keys == sorted((m, f"q{i}") for m in EVAL_METHODS for i in range(EVAL_PROBLEMS))
    assert not [line for line in lines if line.get("error")]  # none recorded as failed
    print(f"\nRay eval: needed={EVAL_NEEDED} total={total} in_flight={in_flight}")
    # Every run once, in the shares (none again in the driver); only what was in flight
    # in the killed worker is asked again.
    assert EVAL_NEEDED <= total <= EVAL_NEEDED + in_flight
    assert (out / "report.json").is_file()
    assert not [p for p in out.iterdir() if p.name.startswith(("ray-", "results.jsonl.ray"))]
