"""``pacore run`` end to end against a hostile upstream (issue 18, part 3).

A real ``pacore run`` subprocess talks to a
:class:`~pacore_graph.testing.hostile_upstream.HostileServer` on loopback. The
attack is in the problem text; with ``@odd`` only the explorers whose seed is
odd are attacked (``--no-batch --seed 0``: explorers 1 and 3 of round 0), so
the run goes on and the attacked trajectories are recorded as failed.
Peak memory is the ``pacore`` child's own (``ru_maxrss`` of a wrapper's only
child), with a generous bound: it tells a bounded read from reading 200 MB.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pacore_graph.testing.hostile_upstream import HostileServer, marker

REPO_ROOT = Path(__file__).resolve().parents[2]

#: Runs its arguments as a child and reports the child's peak RSS on stderr.
PEAK_RSS = (
    "import resource, subprocess, sys\n"
    "proc = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "sys.stdout.write(proc.stdout)\n"
    "sys.stderr.write(proc.stderr)\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "sys.stderr.write(f'PEAK_RSS_KB {peak}\\n')\n"
    "sys.exit(proc.returncode)\n"
)


@pytest.fixture
def upstream() -> Iterator[HostileServer]:
    with HostileServer(size=200_000_000, drip_interval=1.0).run_in_thread() as server:
        yield server


def pacore_run(
    tmp_path: Path, server: HostileServer, question: str, *flags: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any] | None, int]:
    """``pacore run`` on one problem; its process, output record and peak RSS in KiB."""
    data, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    data.write_text(json.dumps({"id": "p1", "question": question}) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PACORE_")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    argv = [sys.executable, "-m", "pacore_graph.cli", "run", "--input", str(data)]
    argv += ["--output", str(out), "--base-url", server.base_url, "--model", "m"]
    argv += ["--no-progress", *flags]
    proc = subprocess.run(
        [sys.executable, "-c", PEAK_RSS, *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    found = re.search(r"PEAK_RSS_KB (\d+)", proc.stderr)
    assert found, proc.stderr
    lines = out.read_text().splitlines() if out.exists() else []
    return proc, json.loads(lines[0]) if lines else None, int(found.group(1))


def test_a_200_mb_answer_fails_its_trajectory_and_memory_stays_bounded(
    tmp_path: Path, upstream: HostileServer
) -> None:
    question = f"What is 2+2? {marker('huge_body', odd_seeds_only=True)}"
    proc, record, peak_kb = pacore_run(
        tmp_path, upstream, question, "--rounds", "4", "--seed", "0", "--no-batch"
    )
    assert proc.returncode == 0, proc.stderr
    assert record is not None
    first = {t["index"]: t for t in record["rounds"][0]}
    assert [i for i, t in sorted(first.items()) if t["failed"]] == [1, 3]
    for i in (1, 3):
        assert first[i]["error"].startswith("response too large")
        assert first[i]["content"] == ""
    assert record["answer"] is not None  # the run went on from the two good explorers
    assert upstream.attacks_sent["huge_body"] == 2  # not retried
    assert upstream.completed.get("huge_body", 0) == 0  # neither body was read to its end
    assert peak_kb < 600 * 1024, f"peak RSS {peak_kb / 1024:.0f} MiB"


def test_negative_usage_fails_its_trajectory_and_never_makes_ttc_negative(
    tmp_path: Path, upstream: HostileServer
) -> None:
    question = f"What is 2+2? {marker('usage_negative', odd_seeds_only=True)}"
    proc, record, _ = pacore_run(
        tmp_path, upstream, question, "--rounds", "4", "--seed", "0", "--no-batch"
    )
    assert proc.returncode == 0, proc.stderr
    assert record is not None
    assert record["effective_ttc"] >= 0 and all(t >= 0 for t in record["ttc_per_round"])
    failed = [t for t in record["rounds"][0] if t["failed"]]
    assert [t["index"] for t in failed] == [1, 3]
    assert all("malformed reply" in t["error"] and "outside" in t["error"] for t in failed)
    assert "Traceback" not in proc.stderr


def test_a_one_byte_a_second_upstream_ends_at_the_call_deadline(
    tmp_path: Path, upstream: HostileServer
) -> None:
    """``--timeout 1 --retries 2``: a 2 s call deadline, not attempts x n-split levels."""
    question = f"What is 2+2? {marker('slow_body')}"
    proc, record, _ = pacore_run(
        tmp_path, upstream, question, "--rounds", "4", "--timeout", "1", "--retries", "2"
    )
    assert proc.returncode == 1, proc.stderr
    assert record is not None
    assert "call deadline of 2s reached" in record["error"]
    # One n=4 request and its one retry; without the deadline the n-splits
    # (2 + 2, then 4 singles, each with its retry) made it 14.
    assert upstream.attacks_sent["slow_body"] <= 2
    assert "Traceback" not in proc.stderr
