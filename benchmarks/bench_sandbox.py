"""What one sandboxed call costs, and what the workspace copy in and back adds.

Variants, each a ``true`` shell command run through ``LocalSandbox.execute``:

- ``fresh``: no ``workdir`` (an empty temporary workspace, nothing copied
  back). The baseline.
- ``repo-unchanged``: a given workspace of ``--files`` files totalling about
  ``--mib`` MiB, which the code does not change (copied in; nothing rewritten
  on the way back).
- ``repo-touch-all``: the same workspace, every file rewritten by the code
  (copied in, every file copied back).

Prints the median wall time per call over ``--repeats`` calls, alternating
variants, and each variant's ratio to ``fresh`` measured in the same sitting.

    python benchmarks/bench_sandbox.py                       # 500 files, 20 MiB
    python benchmarks/bench_sandbox.py --files 5000 --mib 100 --repeats 5
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from pacore_graph.tools.sandbox import ExecRequest, LocalSandbox, SandboxLimits

__all__ = ["main"]


def _make_repo(root: Path, files: int, mib: int) -> None:
    size = max(1, mib * 1024 * 1024 // files)
    for i in range(files):
        folder = root / f"pkg{i % 20}"
        folder.mkdir(exist_ok=True)
        (folder / f"mod{i}.py").write_bytes(b"# x\n" * (size // 4))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--mib", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    limits = SandboxLimits(wall_time_s=60.0, cpu_time_s=60, max_workspace_bytes=1024 * 1024**2)
    repo = Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
    try:
        _make_repo(repo, args.files, args.mib)
        variants = {
            "fresh": ExecRequest(code="true", language="bash"),
            "repo-unchanged": ExecRequest(code="true", language="bash", workdir=repo),
            "repo-touch-all": ExecRequest(
                code="find . -type f -exec touch {} +", language="bash", workdir=repo
            ),
        }
        with LocalSandbox(limits) as sandbox:
            times: dict[str, list[float]] = {name: [] for name in variants}
            for _ in range(args.repeats):
                for name, request in variants.items():
                    started = time.perf_counter()
                    result = sandbox.execute(request)
                    times[name].append(time.perf_counter() - started)
                    assert result.ok, (name, result.summary(), result.stderr)
        base = statistics.median(times["fresh"])
        print(f"workspace: {args.files} files, {args.mib} MiB; median of {args.repeats} calls")
        print(f"{'variant':<16} {'median s':>9} {'x fresh':>8}")
        for name, samples in times.items():
            median = statistics.median(samples)
            print(f"{name:<16} {median:>9.3f} {median / base:>8.2f}")
    finally:
        shutil.rmtree(repo, ignore_errors=True)


if __name__ == "__main__":
    main()
