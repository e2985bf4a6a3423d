"""A durable ``pacore run --input`` against ``--checkpoint none``, as whole processes.

Issue 22 part 2 asks for the default, durable dataset run (SQLite
checkpoints, ``sync`` durability) within 1.05x the wall and 1.3x the CPU of
the same run without checkpoints. This runs both as users do: one
``pacore run --input ... --preset high`` process each, against the scripted
OpenAI-compatible server in another process (0.5 s latency by default), the
variants alternating, and prints medians of wall and CPU (``os.wait4``:
start-up and exit included) and the durable run's ratios to the
``--checkpoint none`` run measured in the same sitting.

Variants: ``durable`` (the default), ``none`` (``--checkpoint none``), and
``base``: the durable run of another copy of the package (``--base-src DIR``,
e.g. ``git archive <commit> pacore_graph | tar -x -C DIR``, with graphs/ and
tools/ moved into DIR/pacore_graph/), imported instead of this checkout, so
that a lever is measured against the code before it in the same sitting.

    python benchmarks/bench_durable.py                          # 800 problems, 3 repeats
    python benchmarks/bench_durable.py --problems 200 --repeats 5 --latency 0
    python benchmarks/bench_durable.py --reasoning-words 400     # longer trajectories
    python benchmarks/bench_durable.py --variants base,durable,none --base-src /tmp/base
    python benchmarks/bench_durable.py --variants durable,floor,none  # the saver's share
    python benchmarks/bench_durable.py --variants durable,steps,none  # journal vs checkpoints
    python benchmarks/bench_durable.py --variants durable,ray --ray-workers 2

``floor`` is the durable run with a store that stores nothing (aput,
aput_writes and the explorer journal's writes return at once): what
durability costs before a byte is encoded or written.

``steps`` is the durable run as it was before the explorer journal (issue
22): LangGraph's per-step checkpoints in the SQLite saver, the journal
turned off.

``ray`` is the durable run over a local Ray cluster started for it (``--ray
local --ray-workers N``, Ray's start-up included): its wall against one
process on the same workload. Its CPU figure misses the Ray workers' (they
are not this process's children), so only its wall is compared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pacore_graph.runs.filenames import RUN_CHECKPOINT_SUFFIX

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "pacore_graph" / "testing" / "scripted_server.py"
VARIANTS = ("durable", "none", "base", "floor", "steps", "ray")

#: Runs ``pacore`` from another copy of the package: the editable install's
#: import hook, which would find this checkout first, is taken out.
_BASE_LAUNCHER = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f)]; "
    "sys.path.insert(0, {src!r}); sys.argv[0] = 'pacore'; "
    "from pacore_graph.cli import main; sys.exit(main())"
)

#: Runs the durable ``pacore run`` with a store that stores nothing: what durability
#: costs before a byte is encoded or written (LangGraph's per-step work for a thread
#: with checkpoints, the journal's keys for a journaled one).
_FLOOR_LAUNCHER = (
    "import sys; import pacore_graph.runs.sqlite_store as store\n"
    "class Nothing(store.GroupCommitSqliteSaver):\n"
    "    async def aput(self, config, checkpoint, metadata, new_versions):\n"
    "        conf = config['configurable']\n"
    "        return {'configurable': {'thread_id': conf['thread_id'],\n"
    "            'checkpoint_ns': conf['checkpoint_ns'], 'checkpoint_id': checkpoint['id']}}\n"
    "    async def aput_writes(self, *args, **kwargs): return None\n"
    "    async def adelete_thread(self, thread_id): return None\n"
    "    async def journal_record(self, thread, key, trajectories): return None\n"
    "store.GroupCommitSqliteSaver = Nothing\n"
    "sys.argv[0] = 'pacore'; from pacore_graph.cli import main; sys.exit(main())"
)

#: The durable run on LangGraph's per-step checkpoints: the journal turned off.
_STEPS_LAUNCHER = (
    "import sys; import pacore_graph.runs.fanout as fo\n"
    "fo._can_journal = lambda saver: False\n"
    "sys.argv[0] = 'pacore'; from pacore_graph.cli import main; sys.exit(main())"
)


def write_dataset(path: Path, count: int) -> None:
    with path.open("w", encoding="utf-8") as f:
        for i in range(count):
            q = f"Problem {i}: compute the sum of the first {i + 10} odd numbers."
            f.write(json.dumps({"id": f"p{i}", "question": q}) + "\n")


def run_once(
    variant: str,
    url: str,
    data: Path,
    work: Path,
    concurrency: int,
    base_src: Path | None,
    ray_workers: int = 2,
) -> dict[str, Any]:
    out = work / f"out-{variant}-{time.monotonic_ns()}.jsonl"
    argv = [sys.executable, "-m", "pacore_graph.cli", "run", "--input", str(data)]
    if variant == "base":
        assert base_src is not None
        argv[1:3] = ["-c", _BASE_LAUNCHER.format(src=str(base_src))]
    argv += ["--output", str(out), "--base-url", url, "--model", "scripted"]
    argv += ["--preset", "high", "--no-progress", "--max-concurrency", str(concurrency)]
    if variant == "floor":
        argv[1:3] = ["-c", _FLOOR_LAUNCHER]
    if variant == "steps":
        argv[1:3] = ["-c", _STEPS_LAUNCHER]
    if variant == "none":
        argv += ["--checkpoint", "none"]
    if variant == "ray":
        argv += ["--ray", "local", "--ray-workers", str(ray_workers)]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=work)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{variant} failed ({code}):\n{err.decode()[-3000:]}")
    lines = sum(1 for _ in out.open(encoding="utf-8"))
    # The file ``pacore run`` keeps beside its output (the package's own name for it:
    # a hand-written suffix here once named a file that never exists, so always False).
    ckpt = out.with_name(out.name + RUN_CHECKPOINT_SUFFIX)
    return {
        "variant": variant,
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "lines": lines,
        "ckpt_left": ckpt.is_file(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", type=int, default=800)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument(
        "--reasoning-words",
        type=int,
        default=6,
        help="words of each scripted trajectory's reasoning (larger payloads to encode)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=1024)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--base-src", type=Path, help="the package copy the base variant runs")
    parser.add_argument("--ray-workers", type=int, default=2, help="the ray variant's tasks")
    parser.add_argument("--json", type=Path, help="also write the raw runs here")
    args = parser.parse_args()
    variants = args.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            parser.error(f"unknown variant {v!r}; choose from {', '.join(VARIANTS)}")
    if "base" in variants and args.base_src is None:
        parser.error("the base variant needs --base-src")

    from pacore_graph.testing.loopback_server import spawn_server

    argv = [sys.executable, str(SERVER), "--port", "0", "--latency", str(args.latency)]
    argv += ["--reasoning-words", str(args.reasoning_words)]
    server, url = spawn_server([*argv, "--reasoning-mode", "reasoning"])
    runs: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-durable-") as tmp:
            work = Path(tmp)
            data = work / "data.jsonl"
            write_dataset(data, args.problems)
            for rep in range(args.repeats):
                order = variants if rep % 2 == 0 else variants[::-1]
                for v in order:
                    run = run_once(
                        v, url, data, work, args.concurrency, args.base_src, args.ray_workers
                    )
                    runs.append(run)
                    print(
                        f"  {v:8s} wall {run['wall_s']:6.2f} s  cpu {run['cpu_s']:6.2f} s  "
                        f"rss {run['peak_rss_mb']:5.0f} MB  lines {run['lines']}",
                        flush=True,
                    )
    finally:
        server.terminate()
        server.wait()
    medians = {
        v: {
            k: statistics.median(r[k] for r in runs if r["variant"] == v)
            for k in ("wall_s", "cpu_s", "peak_rss_mb")
        }
        for v in variants
    }
    load = os.getloadavg()[0]
    print(f"\n{args.problems} problems, high, latency {args.latency} s, load {load:.1f}")
    base = medians.get("none")
    for v, m in medians.items():
        ratio = ""
        if base is not None:
            wall, cpu = m["wall_s"] / base["wall_s"], m["cpu_s"] / base["cpu_s"]
            ratio = f"  {wall:.3f}x wall  {cpu:.3f}x cpu"
        print(f"{v:8s} wall {m['wall_s']:6.2f} s  cpu {m['cpu_s']:6.2f} s{ratio}")
    if args.json is not None:
        args.json.write_text(json.dumps({"runs": runs, "medians": medians}, indent=2))


if __name__ == "__main__":
    main()
