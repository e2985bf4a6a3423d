"""How long ``pacore --help`` takes, against a bare interpreter start in the same run.

The parser is built from a plain option table (no pydantic, no asyncio), so
help costs little more than starting Python. Prints medians over ``--repeat``
runs of each command, interleaved so machine load hits all alike::

    python benchmarks/bench_cli_startup.py --repeat 15
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS = {
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    "pacore --help": [sys.executable, "-m", "pacore_graph", "--help"],
    "pacore run --help": [sys.executable, "-m", "pacore_graph", "run", "--help"],
    "pacore --version": [sys.executable, "-m", "pacore_graph", "--version"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs per command (default: 15)")
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeat):
        for name, argv in COMMANDS.items():
            started = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - started)
    base = statistics.median(times["python -c pass (baseline)"])
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"{name:28s} median {median:.3f}s  ({median / base:.2f}x baseline)")


if __name__ == "__main__":
    main()
