"""The shared fan-out of graph runs (runs/fanout), used on its own.

The whole resumable path (a SIGKILLed ``pacore run --input`` resuming) is
test_durable_runs.py's; here a real compiled graph runs jobs in one process
and the tests check what the caller is promised: a bound on runs in flight,
one ``on_done`` per job, a failed run reported rather than raised, a failure
of the fan-out itself raised alone, finished threads deleted.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.runs.fanout import Job, run_jobs
from pacore_graph.settings.config import SamplingParams
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient
from pacore_graph.values.records import Completion, PaCoReResult

HANG_GUARD_S = 30


def by_problem(call: FakeCall) -> str:
    """Answers with the problem's own text (found inside a synthesis prompt too)."""
    found = re.search(r"Original Problem:\n(.*?)\n", call.last_user)
    problem = found.group(1) if found else call.last_user
    return f"<think>t</think>{boxed(problem)}"


def boxed(problem: str) -> str:
    return f"\\boxed{{{problem}}}"


class CountingClient:
    """A chat client that counts calls in flight; each call waits until ``want`` are.

    Waiting makes the peak a fact rather than a race: with a bound of ``want``
    runs the peak is exactly ``want``; the hang guard only matters if the
    fan-out let fewer run at once than it may.
    """

    model = "fake"

    def __init__(self, want: int) -> None:
        self.inner = FakeChatClient(reply=by_problem)
        self.want = want
        self.in_flight = 0
        self.peak = 0
        self.reached = asyncio.Event()

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        params: SamplingParams,
        seed: int | None = None,
    ) -> list[Completion]:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        if self.in_flight >= self.want:
            self.reached.set()
        try:
            await asyncio.wait_for(self.reached.wait(), HANG_GUARD_S)
            return await self.inner.complete(messages, n=n, params=params, seed=seed)
        finally:
            self.in_flight -= 1


def jobs(problems: Sequence[str]) -> list[Job]:
    return [
        Job(
            thread_id=f"t{i}",
            state={"messages": [{"role": "user", "content": p}] if p else []},
            payload=p,
        )
        for i, p in enumerate(problems)
    ]


class Recorder:
    def __init__(self) -> None:
        self.done: dict[str, PaCoReResult | BaseException] = {}

    async def __call__(
        self, job: Job, result: PaCoReResult | None, exc: BaseException | None
    ) -> None:
        assert (result is None) != (exc is None)  # exactly one of them
        assert job.thread_id not in self.done  # once per job
        self.done[job.thread_id] = result if result is not None else exc  # type: ignore[assignment]


CONFIG = PaCoReConfig(rounds=[1])


async def test_at_most_max_in_flight_runs_at_once_and_each_is_reported_once() -> None:
    client = CountingClient(want=2)
    graph = build_pacore_graph(client, config=CONFIG)
    problems = [f"p{i}" for i in range(5)]
    done = Recorder()
    await run_jobs(graph, jobs(problems), done, max_in_flight=2)
    assert client.peak == 2
    assert set(done.done) == {f"t{i}" for i in range(len(problems))}
    for i, p in enumerate(problems):
        result = done.done[f"t{i}"]
        assert isinstance(result, PaCoReResult) and result.answer == boxed(p)  # its own problem


async def test_a_failed_run_is_reported_and_the_others_go_on() -> None:
    graph = build_pacore_graph(FakeChatClient(reply=by_problem), config=CONFIG)
    done = Recorder()
    await run_jobs(graph, jobs(["a", "", "c"]), done, max_in_flight=3)
    assert isinstance(done.done["t1"], ValueError) and "empty problem" in str(done.done["t1"])
    answers = [done.done[t].answer for t in ("t0", "t2")]  # type: ignore[union-attr]
    assert answers == [boxed("a"), boxed("c")]


async def test_a_caller_that_cannot_write_stops_the_fan_out_and_is_raised_alone() -> None:
    graph = build_pacore_graph(FakeChatClient(reply=by_problem), config=CONFIG)
    written: list[str] = []

    async def full_disk(job: Job, result: PaCoReResult | None, exc: BaseException | None) -> None:
        if written:
            raise OSError(28, "No space left on device")
        written.append(job.thread_id)

    with pytest.raises(OSError, match="No space left") as caught:
        await run_jobs(graph, jobs([f"p{i}" for i in range(6)]), full_disk, max_in_flight=1)
    assert not isinstance(caught.value, BaseExceptionGroup)
    assert len(written) == 1  # nothing was written after the failure


async def test_a_finished_run_leaves_no_checkpoint_behind() -> None:
    saver = InMemorySaver()
    graph = build_pacore_graph(FakeChatClient(reply=by_problem), config=CONFIG)
    done = Recorder()
    work = jobs(["a", "b"])
    await run_jobs(graph, work, done, max_in_flight=2, checkpointer=saver)
    assert set(done.done) == {job.thread_id for job in work}
    for job in work:  # the results line is the record; the thread only bridged a crash
        assert await saver.aget_tuple({"configurable": {"thread_id": job.thread_id}}) is None
