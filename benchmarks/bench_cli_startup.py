"""Start-up of ``pacore``: ``--help``, and how soon ``pacore run`` sends its first request.

Two sections, each against baselines measured in the same run, commands
interleaved so machine load hits all alike; every figure is a median over
``--repeat`` runs.

``help``: wall time of ``pacore --help`` (and friends) against a bare
``python -c pass``. The parser is built from a plain option table (no
pydantic, no asyncio), so help costs little more than starting Python.

``first-request``: the seconds from starting a process to the first chat
request reaching a throughput-bound server (``pacore_graph.testing.
throughput_server``, started here in its own process; its ``/stats`` report
``first_request_unix``). Measured for

- ``pacore run --input D --output R --preset high --no-progress`` (5 problems,
  a fresh output file each run, so its SQLite checkpointer is created too);
- ``pacore run "Q"`` (one question, default preset);
- ``aiohttp client`` (baseline): ``python -c`` importing asyncio and aiohttp and
  posting one request -- what any Python client pays;
- ``langgraph + aiohttp client`` (floor): the same, after ``import
  langgraph.graph`` -- what any LangGraph program with this HTTP client pays;
- ``import langgraph.graph`` (import floor): that process's whole wall time.

Bytecode: an installed package has its ``.pyc`` files, but a checkout run
with ``PYTHONDONTWRITEBYTECODE=1`` recompiles every ``pacore_graph`` module on
each start (about 0.06 s here). So by default the children write and read
bytecode under a temporary ``PYTHONPYCACHEPREFIX`` (one untimed warm-up run
each fills it); ``--as-is`` keeps this process's environment instead.
Children run in a temporary folder, so the installed ``pacore_graph`` (or
the one ``PYTHONPATH`` names: compare two trees so) is what starts, not a
checkout in the current folder::

    python benchmarks/bench_cli_startup.py --repeat 15
    python benchmarks/bench_cli_startup.py --section first-request --repeat 9
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
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

HELP_COMMANDS = {
    "python -c pass (baseline)": [sys.executable, "-c", "pass"],
    "pacore --help": [sys.executable, "-m", "pacore_graph", "--help"],
    "pacore run --help": [sys.executable, "-m", "pacore_graph", "run", "--help"],
    "pacore --version": [sys.executable, "-m", "pacore_graph", "--version"],
}

_CLIENT = """
import asyncio, sys
{extra}import aiohttp
async def main():
    async with aiohttp.ClientSession() as session:
        body = {{"model": "t", "messages": [{{"role": "user", "content": "What is 1+1?"}}]}}
        async with session.post(sys.argv[1] + "/chat/completions", json=body) as response:
            await response.read()
asyncio.run(main())
"""

CLIENT_BASELINE = "aiohttp client (baseline)"
LANGGRAPH_FLOOR = "langgraph + aiohttp client (floor)"
IMPORT_FLOOR = "import langgraph.graph (wall)"
RUN_DATASET = "pacore run --input (5 problems, high)"
RUN_QUESTION = 'pacore run "Q"'


def _http_json(url: str, method: str = "GET") -> dict[str, object]:
    request = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(request, timeout=30) as response:
        data: dict[str, object] = json.loads(response.read())
        return data


def _start_server(env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen[str], str]:
    from pacore_graph.testing.loopback_server import spawn_server

    argv = [sys.executable, "-m", "pacore_graph.testing.throughput_server"]
    return spawn_server(argv, env=env, cwd=cwd)


def _child_env(as_is: bool, cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    if not as_is:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def _first_request_commands(url: str, work: Path) -> dict[str, Callable[[int], list[str]]]:
    dataset = work / "problems.jsonl"
    dataset.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "question": f"What is {i}+1?"}) + "\n" for i in range(5)
        ),
        encoding="utf-8",
    )
    py = sys.executable
    return {
        CLIENT_BASELINE: lambda k: [py, "-c", _CLIENT.format(extra=""), url],
        LANGGRAPH_FLOOR: lambda k: [
            py,
            "-c",
            _CLIENT.format(extra="import langgraph.graph\n"),
            url,
        ],
        IMPORT_FLOOR: lambda k: [py, "-c", "import langgraph.graph"],
        RUN_DATASET: lambda k: [
            py,
            "-m",
            "pacore_graph",
            "run",
            "--input",
            str(dataset),
            "--output",
            str(work / f"results-{k}.jsonl"),
            "--base-url",
            url,
            "--model",
            "t",
            "--preset",
            "high",
            "--no-progress",
        ],
        RUN_QUESTION: lambda k: [
            py,
            "-m",
            "pacore_graph",
            "run",
            "What is 1+1?",
            "--base-url",
            url,
            "--model",
            "t",
        ],
    }


def _first_request_once(
    name: str, argv: Sequence[str], root: str, env: dict[str, str], cwd: Path
) -> float:
    """Seconds from starting ``argv`` to the server's first request (the wall time for imports)."""
    _http_json(root + "/stats/reset", "POST")
    started_unix = time.time()
    started = time.perf_counter()
    out = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if out.returncode != 0:
        raise RuntimeError(f"{name} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    if name == IMPORT_FLOOR:
        return wall
    first = _http_json(root + "/stats")["first_request_unix"]
    if not isinstance(first, (int, float)):
        raise RuntimeError(f"{name}: the server saw no request")
    return float(first) - started_unix


def bench_first_request(repeat: int, env: dict[str, str], bytecode: str) -> None:
    with tempfile.TemporaryDirectory(prefix="pacore-startup-") as tmp:
        work = Path(tmp)
        server, url = _start_server(env, work)
        try:
            root = url.removesuffix("/v1")
            commands = _first_request_commands(url, work)
            times: dict[str, list[float]] = {name: [] for name in commands}
            for name, argv in commands.items():  # warm-up: fills the bytecode cache
                _first_request_once(name, argv(-1), root, env, work)
            for k in range(repeat):
                for name, argv in commands.items():
                    times[name].append(_first_request_once(name, argv(k), root, env, work))
        finally:
            server.terminate()
            server.wait(timeout=30)
    base = statistics.median(times[CLIENT_BASELINE])
    floor = statistics.median(times[LANGGRAPH_FLOOR])
    print(f"first request after process start (median of {repeat}, bytecode {bytecode}):")
    for name, runs in times.items():
        median = statistics.median(runs)
        print(
            f"  {name:40s} {median:.3f}s  ({median / base:.2f}x baseline, "
            f"{median / floor:.2f}x floor; range {min(runs):.3f}-{max(runs):.3f})"
        )


def bench_help(repeat: int, env: dict[str, str], bytecode: str, cwd: Path) -> None:
    times: dict[str, list[float]] = {name: [] for name in HELP_COMMANDS}
    for argv in HELP_COMMANDS.values():  # warm-up: fills the bytecode cache
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env, cwd=cwd)
    for _ in range(repeat):
        for name, argv in HELP_COMMANDS.items():
            started = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env, cwd=cwd)
            times[name].append(time.perf_counter() - started)
    base = statistics.median(times["python -c pass (baseline)"])
    print(f"wall time (median of {repeat}, bytecode {bytecode}):")
    for name, runs in times.items():
        median = statistics.median(runs)
        print(f"  {name:28s} median {median:.3f}s  ({median / base:.2f}x baseline)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs per command (default: 15)")
    parser.add_argument(
        "--section",
        choices=("help", "first-request", "all"),
        default="all",
        help="which measurements to take (default: all)",
    )
    parser.add_argument(
        "--as-is",
        action="store_true",
        help="children inherit this environment's bytecode settings (default: cached .pyc)",
    )
    args = parser.parse_args()
    bytecode = "as is" if args.as_is else "cached"
    with tempfile.TemporaryDirectory(prefix="pacore-pycache-") as cache:
        env = _child_env(args.as_is, Path(cache))
        if args.section in ("help", "all"):
            bench_help(args.repeat, env, bytecode, Path(cache))
        if args.section in ("first-request", "all"):
            bench_first_request(args.repeat, env, bytecode)


if __name__ == "__main__":
    main()
