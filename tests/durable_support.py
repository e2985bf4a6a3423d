"""What the durable-run tests share: a dataset, its answers, a sample count, a seed client.

``test_durable_runs`` (kill and resume) and ``test_store_failures`` (a store or
disk failing mid-run) both measure redone work as samples the server returned.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pacore_graph.settings.config import SamplingParams
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer
from pacore_graph.values.records import Completion

__all__ = [
    "SeedClient",
    "by_input",
    "kill_between_responses",
    "samples_returned",
    "saved_tasks",
    "wait_until",
    "write_dataset",
]


def by_input(req: ScriptedRequest) -> ScriptedReply:
    """An answer chosen by the question and the sample's index, never by call order."""
    return ScriptedReply(
        content=f"answer {len(req.last_user) % 97} sample {req.sample_index}",
        completion_tokens=5,
    )


def samples_returned(srv: ScriptedServer) -> int:
    """Samples the server answered (an ``n``-request counts ``n``)."""
    return sum(int(r.body.get("n", 1)) for r in list(srv.requests) if r.status == 200)


def wait_until(
    proc: subprocess.Popen[bytes], ready: Callable[[], bool], *, timeout_s: float, what: str
) -> None:
    """Poll ``ready`` until true; fail with ``proc``'s stderr if it exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{what} ended early: {proc.communicate()[1][-3000:]!r}")
        time.sleep(0.005)


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
