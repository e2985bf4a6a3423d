"""cli/ray_run: ``pacore run --input`` and ``pacore eval`` over a local two-worker Ray cluster.

``pacore run --input ... --ray local --ray-workers 2`` (and ``pacore eval``) runs as users run it,
against the scripted server over loopback; mid-run it SIGKILLs one of the Ray
worker processes running a share. Ray runs that share again, which resumes
from its checkpoints: every problem gets one line, and the samples asked again
are at most those in flight in the killed worker. The plan and the merge are
runs/ray_cluster's (tests/runs/test_ray_cluster.py).

The first two tests replace Ray alone (``run_shares``, which would start a
cluster: seconds) by the same pickling it does, then each task in a thread of
its own, to check what a task carries: the command's record, never the
parser's namespace.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pacore_graph.cli import main
from pacore_graph.cli.command_args import EvalArgs, RunArgs
from pacore_graph.runs import ray_cluster
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


class _Classes(pickle.Unpickler):
    """Loads a pickle, noting every class and function it names (what a worker imports)."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.named: set[tuple[str, str]] = set()

    def find_class(self, module: str, name: str) -> Any:
        self.named.add((module, name))
        return super().find_class(module, name)


def _tasks_in_threads(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``run_shares`` without Ray: each task pickled and loaded as Ray does, then run in a
    thread of its own (a worker has no event loop running). Returns what the tasks carried."""
    carried: list[Any] = []

    def run_shares(
        shares: Sequence[ray_cluster.Share],
        work: Callable[[ray_cluster.Share], int],
        *,
        address: str,
        workers: int,
    ) -> list[int]:
        assert (address, workers) == ("local", 2)
        loader = _Classes(pickle.dumps(work))
        task = loader.load()
        carried.append((loader.named, task))
        with ThreadPoolExecutor(max_workers=1) as pool:
            return [pool.submit(task, share).result() for share in shares]

    monkeypatch.setattr(ray_cluster, "run_shares", run_shares)
    return carried


def test_a_ray_task_of_pacore_run_carries_the_run_record_not_the_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    carried = _tasks_in_threads(monkeypatch)
    data, out = write_dataset(tmp_path / "data.jsonl", 6), tmp_path / "results.jsonl"
    with ScriptedServer(by_input).run_in_thread() as srv:
        url = srv.base_url
        argv = run_argv(data, out, "2", "--ray", "local", "--ray-workers", "2", "--json")
        code = main([*argv, "--base-url", url, "--model", "scripted"])
    assert code == 0, capsys.readouterr().err
    report = capsys.readouterr().out.splitlines()[-1]  # after the shares' own (a thread each)
    assert json.loads(report)["ray_tasks"] == 2
    [(named, task)] = carried
    assert ("argparse", "Namespace") not in named
    assert ("pacore_graph.cli.command_args", "RunArgs") in named
    record = task.args[1]
    assert isinstance(record, RunArgs) and record.settings.base_url == [url]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["request_id"] for line in lines) == [f"q{i}" for i in range(6)]
    assert all([len(r) for r in line["rounds"]] == [2, 1] for line in lines)


def test_a_ray_task_of_pacore_eval_carries_the_eval_record_not_the_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    carried = _tasks_in_threads(monkeypatch)
    data, out = tmp_path / "data.jsonl", tmp_path / "ev"
    with data.open("w") as fh:
        for i in range(4):
            q = {"role": "user", "content": f"What is {i} + {i}?"}
            fh.write(json.dumps({"id": f"q{i}", "messages": [q], "ground_truth": str(2 * i)}))
            fh.write("\n")
    with ScriptedServer(by_input).run_in_thread() as srv:
        argv = ["eval", "--dataset", str(data), "--methods", "single,pacore:2", "--out", str(out)]
        argv += ["--base-url", srv.base_url, "--model", "scripted", "--no-progress"]
        code = main([*argv, "--ray", "local", "--ray-workers", "2"])
        asked_by_shares = len(srv.requests)
    assert code == 0, capsys.readouterr().err
    [(named, task)] = carried
    assert ("argparse", "Namespace") not in named
    assert ("pacore_graph.cli.command_args", "EvalArgs") in named
    assert isinstance(task.args[1], EvalArgs)
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    keys = sorted((line["method"], line["problem_id"]) for line in lines)
    assert keys == sorted((m, f"q{i}") for m in ("single", "pacore:2") for i in range(4))
    assert asked_by_shares == len(srv.requests)  # every run was the shares'
    assert (out / "report.json").is_file()


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
