"""What tracing costs a run when nobody collects spans, isolated from the noise.

End-to-end medians (``bench_core.py``) move by several percent between runs on
these 2-core machines, more than the cost being measured. This script times
exactly the tracing hooks a run executes — per run ``start_run``/``end_run``,
per round ``start_round``/``compaction``/``end_round``, per explorer the
``explorer`` span and ``record`` — for the core workload's 200 runs x (32, 4,
1) explorers, in three modes:

- ``disabled``: ``TraceOptions(enabled=False)``, no span calls (the baseline);
- ``noop``: the OpenTelemetry API with no SDK provider (what "tracing off"
  is for a user who never configured tracing);
- ``sdk``: an SDK provider with a batch processor and an in-memory exporter.

It prints the hooks' total time per mode, the median of ``--repeats``, and
that time as a share of the graph's measured wall time for the same workload
(``--graph-wall``, default: the figure in benchmarks/README.md).

    python benchmarks/bench_tracing_overhead.py
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from pacore_graph.otel.spans import RunTracer, TraceOptions
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.values.records import PaCoReResult, Trajectory

SCHEDULE = (32, 4, 1)


def workload(tracer: RunTracer, runs: int) -> float:
    """Time the hooks of ``runs`` PaCoRe runs; return seconds."""
    started = time.perf_counter()
    for n in range(runs):
        run_id = f"run{n}"
        tracer.start_run(run_id, SCHEDULE, "high")
        rounds: list[tuple[Trajectory, ...]] = []
        refs: tuple[int, ...] = ()
        for r, k in enumerate(SCHEDULE):
            tracer.start_round(run_id, r, k, ["m" * 200] * len(refs))
            done = []
            for i in range(k):
                with tracer.explorer(run_id, i, refs, ({"role": "user", "content": "q"},)) as s:
                    t = Trajectory(round=r, index=i, content="x", message="x", completion_tokens=9)
                    s.record(t)
                done.append(t)
            tracer.compaction(run_id, "conclusion", done)
            tracer.end_round(run_id, done)
            rounds.append(tuple(done))
            refs = tuple(range(k))
        result = PaCoReResult(answer="x", reasoning=None, rounds=tuple(rounds), schedule=SCHEDULE)
        tracer.end_run(run_id, result)
    return time.perf_counter() - started


def make(mode: str) -> tuple[RunTracer, Any]:
    config = PaCoReConfig.from_preset("high")
    if mode == "disabled":
        return RunTracer(TraceOptions(enabled=False), config=config, model="m"), None
    if mode == "noop":
        return RunTracer(TraceOptions(), config=config, model="m"), None
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(InMemorySpanExporter(), max_queue_size=65536))
    return RunTracer(TraceOptions(tracer_provider=provider), config=config, model="m"), provider


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--graph-wall",
        type=float,
        default=7.10,
        help="the graph's wall time for the same workload, seconds",
    )
    args = parser.parse_args()
    times: dict[str, list[float]] = {"disabled": [], "noop": [], "sdk": []}
    for _ in range(args.repeats):
        for mode in times:
            tracer, provider = make(mode)
            times[mode].append(workload(tracer, args.runs))
            if provider is not None:
                provider.shutdown()
    base = statistics.median(times["disabled"])
    print(
        f"{args.runs} runs x {SCHEDULE} explorers = {args.runs * sum(SCHEDULE)} explorer spans; "
        f"median of {args.repeats}"
    )
    print(f"{'mode':<10}{'hooks s':>10}{'over disabled s':>17}{'share of graph wall':>21}")
    for mode, values in times.items():
        med = statistics.median(values)
        extra = med - base
        print(f"{mode:<10}{med:>10.4f}{extra:>17.4f}{extra / args.graph_wall:>20.2%}")


if __name__ == "__main__":
    main()
