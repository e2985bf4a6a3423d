"""What the durable-run tests share: a dataset, its answers, a sample count, a seed client.

``test_durable_runs`` (kill and resume) and ``test_store_failures`` (a store or
disk failing mid-run) both measure redone work as samples the server returned,
both run ``pacore run`` as a child process (:func:`pacore_command`,
:data:`CHILD_ENV`) and both end on a results file of one line per problem
(:func:`assert_one_line_each`).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cli_support import run_argv

from pacore_graph.settings.config import SamplingParams
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer
from pacore_graph.values.records import Completion

__all__ = [
    "CHILD_ENV",
    "SeedClient",
    "assert_one_line_each",
    "by_input",
    "kill_between_responses",
    "pacore_command",
    "samples_returned",
    "saved_tasks",
    "wait_for_samples",
    "wait_until",
    "write_dataset",
]

#: A ``pacore`` child process's environment: this checkout's package on its path.
CHILD_ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}


def by_input(req: ScriptedRequest) -> ScriptedReply:
    """An answer chosen by the question and the sample's index, never by call order."""
    return ScriptedReply(
        content=f"answer {len(req.last_user) % 97} sample {req.sample_index}",
        completion_tokens=5,
    )


def samples_returned(srv: ScriptedServer) -> int:
    """Samples the server answered (an ``n``-request counts ``n``)."""
    return sum(int(r.body.get("n", 1)) for r in list(srv.requests) if r.status == 200)


def pacore_command(
    srv: ScriptedServer, data: Path, out: Path, rounds: Sequence[int], concurrency: int, *extra: str
) -> list[str]:
    """``python -m pacore_graph.cli run`` over ``data`` against ``srv``, no progress bar."""
    argv = run_argv(
        data,
        out,
        ",".join(map(str, rounds)),
        "--max-concurrency",
        str(concurrency),
        "--no-progress",
        *extra,
        base_url=srv.base_url,
        model="scripted",
    )
    return [sys.executable, "-m", "pacore_graph.cli", *argv]


def assert_one_line_each(out: Path, problems: int) -> list[dict[str, Any]]:
    """``out``'s lines, checked to be one successful line per problem, as after an unbroken run."""
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(line["request_id"] for line in lines) == sorted(f"q{i}" for i in range(problems))
    assert all(not line.get("error") for line in lines)
    return lines


def wait_until(
    proc: subprocess.Popen[Any], ready: Callable[[], bool], *, timeout_s: float, what: str
) -> None:
    """Poll ``ready`` until true; fail with ``proc``'s stderr if it exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{what} ended early: {proc.communicate()[1][-3000:]!r}")
        time.sleep(0.005)


def wait_for_samples(
    proc: subprocess.Popen[Any], srv: ScriptedServer, count: int, *, timeout_s: float
) -> None:
    """Wait until ``srv`` has returned ``count`` samples (the run is under way)."""
    wait_until(proc, lambda: samples_returned(srv) >= count, timeout_s=timeout_s, what="the run")


def kill_between_responses(
    srv: ScriptedServer, kill: Callable[[], None], latency: float
) -> tuple[int, int]:
    """``kill()`` half a latency after the last response; (samples back at the kill, in flight).

    Between responses, not in the instant one leaves the server: the client
    needs a few milliseconds to receive it and to journal it (a result
    killed inside that window is redone). The requests in flight at the
    kill are then answered, to no one, and counted.
    """
    time.sleep(latency / 2)
    at_kill = samples_returned(srv)
    kill()
    time.sleep(latency * 2)
    return at_kill, samples_returned(srv) - at_kill


def write_dataset(path: Path, problems: int) -> Path:
    """``problems`` records ``q0``, ``q1``, ... asking ``What is i + i?``."""
    with path.open("w") as fh:
        for i in range(problems):
            q = {"id": f"q{i}", "messages": [{"role": "user", "content": f"What is {i} + {i}?"}]}
            fh.write(json.dumps(q) + "\n")
    return path


@dataclass
class SeedClient:
    """Answers by seed; seeds in ``hold`` wait until released (a call still in flight)."""

    hold: frozenset[int] = frozenset()
    model: str = "seeded"
    says: str = "answer"
    seeds: list[int | None] = field(default_factory=list)
    answered: int = 0

    async def complete(
        self, messages: Any, *, n: int = 1, params: SamplingParams, seed: int | None = None
    ) -> list[Completion]:
        self.seeds.append(seed)
        if seed in self.hold:
            await asyncio.Event().wait()  # never answers
        self.answered += 1
        return [Completion(content=f"{self.says} from seed {seed}", completion_tokens=3)] * n


async def saved_tasks(graph: Any, config: Any, want: int) -> None:
    """Wait until ``want`` tasks of the thread's next step have their writes saved."""
    for _ in range(500):
        snapshot = await graph.aget_state(config)
        if sum(1 for t in snapshot.tasks if t.result is not None) >= want:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the finished explorers' writes were never saved")
