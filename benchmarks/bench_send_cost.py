"""CPU per explorer ``Send``: the graph's own cost, without HTTP or a server.

The graph runs ``--problems`` problems at ``high`` (32, 4, 1) with a
do-nothing explorer (it returns a fixed trajectory at once), so what is
measured is LangGraph's scheduling plus pacore_graph's nodes: rendering,
fan-out, compaction, routing, records. CPU time (``time.process_time``) is
far steadier than wall time on a loaded machine. Prints the median CPU
microseconds per explorer task over ``--repeats`` runs in this process
(after one warm-up run), with the default GC settings (``graph``) and inside
:func:`~pacore_graph.control.gc_tuning.fan_out_gc` as the CLI runs (``graph-gc``),
next to a bare asyncio baseline doing the same rounds with the same
rendering and compaction in one loop.

``graph-grouped`` is the plain chat explorer with ``n``-batching, as ``pacore
run`` builds it, on an instant in-process client: a round's K explorers are
one ``Send`` (:class:`~pacore_graph.graph.explorer.ExploreGroup`) and one ``n=K``
call, so its per-task figure is the fan-out users get by default (also
measured inside ``fan_out_gc``).

    python benchmarks/bench_send_cost.py
    python benchmarks/bench_send_cost.py --problems 800 --repeats 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

from workload import problems

from pacore_graph import PaCoReConfig, Trajectory, build_pacore_graph
from pacore_graph.control.gc_tuning import fan_out_gc
from pacore_graph.graph.explorer import ExploreTask
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient
from pacore_graph.values.compaction import ConclusionCompactor
from pacore_graph.values.prompts import select_references, synthesis_messages

SCHEDULE = (32, 4, 1)


class Instant:
    """An explorer that answers at once (input-determined text)."""

    async def explore(self, task: ExploreTask, config: Any) -> Trajectory:
        return Trajectory(
            round=task.round,
            index=task.index,
            content=f"<think>step</think>answer {task.index}",
            completion_tokens=3,
            references=task.references,
        )


def instant_reply(call: FakeCall) -> str:
    return f"<think>step</think>answer {call.sample_index}"


async def graph_run(count: int) -> None:
    config = PaCoReConfig.from_preset("high", max_concurrency=1024)
    app = build_pacore_graph(config=config, explorer=Instant(), tracing=False)
    await asyncio.gather(
        *(app.ainvoke({"messages": [{"role": "user", "content": q}]}) for q in problems(count))
    )


async def grouped_run(count: int) -> None:
    config = PaCoReConfig.from_preset("high", max_concurrency=1024)
    app = build_pacore_graph(FakeChatClient(reply=instant_reply), config=config, tracing=False)
    await asyncio.gather(
        *(app.ainvoke({"messages": [{"role": "user", "content": q}]}) for q in problems(count))
    )


async def bare_run(count: int) -> None:
    explorer, compactor = Instant(), ConclusionCompactor()

    async def solve(question: str) -> None:
        convo: list[dict[str, Any]] = [{"role": "user", "content": question}]
        prompt: Any = convo
        previous: tuple[Trajectory, ...] = ()
        for r, k in enumerate(SCHEDULE):
            if r:
                _, texts = select_references(previous, 42, "public")
                prompt = synthesis_messages(convo, texts)
            tasks = [
                ExploreTask(
                    run_id="x", problem_id=None, round=r, index=i, width=k, messages=tuple(prompt)
                )
                for i in range(k)
            ]
            done = await asyncio.gather(*(explorer.explore(t, {}) for t in tasks))
            previous = tuple(
                Trajectory(round=t.round, index=t.index, content=t.content,
                           message=compactor.compact(t))
                for t in done
            )  # fmt: skip

    await asyncio.gather(*(solve(q) for q in problems(count)))


def measure(fn: Any, count: int, repeats: int) -> list[float]:
    asyncio.run(fn(min(count, 20)))  # warm-up: imports, caches
    out = []
    for _ in range(repeats):
        start = time.process_time()
        asyncio.run(fn(count))
        out.append(time.process_time() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    tasks = args.problems * sum(SCHEDULE)
    bare = measure(bare_run, args.problems, args.repeats)
    graph = measure(graph_run, args.problems, args.repeats)
    with fan_out_gc():  # what ``pacore run`` and ``pacore eval`` do
        graph_gc = measure(graph_run, args.problems, args.repeats)
        grouped = measure(grouped_run, args.problems, args.repeats)
    b, g = statistics.median(bare), statistics.median(graph)
    print(f"{args.problems} problems x high = {tasks} explorer tasks, median of {args.repeats}")
    print(f"{'variant':<14}{'CPU s':>8}{'us/task':>10}  runs")
    rows = (
        ("bare", bare, b),
        ("graph", graph, g),
        ("graph-gc", graph_gc, statistics.median(graph_gc)),
        ("graph-grouped", grouped, statistics.median(grouped)),
    )
    for name, runs, med in rows:
        each = " ".join(f"{x:.2f}" for x in runs)
        print(f"{name:<14}{med:>8.2f}{med / tasks * 1e6:>10.0f}  {each}")
    print(
        f"graph over bare: {(g - b) / tasks * 1e6:.0f} us per task; load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
