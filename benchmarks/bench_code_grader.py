"""The code grader's throughput (tests per second) against a bare subprocess loop.

Both sides run the same LiveCodeBench-style program (the prelude, then a
stdin solution) on the same tests with the same parallelism:

- ``bare``: ``subprocess.run([python, "-c", program], input=...)`` per test
  from a thread pool of ``--workers``, comparing stdout with LiveCodeBench's
  rule; no isolation at all (what lm-evaluation-harness does).
- ``grader``: :class:`~pacore_graph.eval.code_grader.CodeGrader` with
  ``workers=--workers``: each test in the sandbox (namespaces, unprivileged
  uid, rlimits, tmpfs workspace), graded answers in parallel as the eval
  harness calls it.

Prints tests/s for each (best of ``--repeats``) and their ratio.

    python benchmarks/bench_code_grader.py                  # 20 answers x 10 tests, 2 workers
    python benchmarks/bench_code_grader.py --answers 40 --tests 20 --workers 4
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from pacore_graph.eval.code_compare import stdout_matches
from pacore_graph.eval.code_grader import CodeGrader
from pacore_graph.eval.code_programs import stdin_program
from pacore_graph.eval.code_tests import CODE_TESTS_KEY, CodeTest, CodeTests

__all__ = ["main"]

SOLUTION = "n = int(input())\nprint(sum(range(n + 1)))"


def _tests(count: int) -> CodeTests:
    return CodeTests(
        tests=tuple(CodeTest(f"{i}\n", f"{i * (i + 1) // 2}\n", "stdin") for i in range(count))
    )


def bare(answers: int, tests: CodeTests, workers: int) -> float:
    """Seconds to run every answer's tests as plain subprocesses."""
    program = stdin_program(SOLUTION)

    def one(test: CodeTest) -> bool:
        done = subprocess.run(
            [sys.executable, "-c", program],
            input=test.input,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return done.returncode == 0 and stdout_matches(done.stdout, test.output)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = list(pool.map(one, [t for _ in range(answers) for t in tests.tests]))
    elapsed = time.perf_counter() - started
    assert all(results)
    return elapsed


def graded(answers: int, tests: CodeTests, workers: int) -> float:
    """Seconds for the code grader to grade every answer (answers graded concurrently)."""
    truth = {CODE_TESTS_KEY: tests.to_json()}
    response = f"```python\n{SOLUTION}\n```"
    with CodeGrader(workers=workers) as grader:
        grader.grade(response, truth)  # start the sandbox outside the timing
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=max(workers, 4)) as pool:
            grades = list(pool.map(lambda _: grader.grade(response, truth), range(answers)))
        elapsed = time.perf_counter() - started
    assert all(g.score == 1.0 for g in grades), grades[0].detail
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--answers", type=int, default=20)
    parser.add_argument("--tests", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    tests = _tests(args.tests)
    total = args.answers * args.tests
    best = {"bare": float("inf"), "grader": float("inf")}
    for _ in range(args.repeats):
        best["bare"] = min(best["bare"], bare(args.answers, tests, args.workers))
        best["grader"] = min(best["grader"], graded(args.answers, tests, args.workers))
    shape = f"{args.answers} answers x {args.tests} tests, {args.workers} workers"
    print(f"{shape}, best of {args.repeats}")
    print(f"{'variant':<8} {'tests/s':>8} {'s':>7}")
    for name, seconds in best.items():
        print(f"{name:<8} {total / seconds:>8.1f} {seconds:>7.2f}")
    print(f"grader / bare throughput: {best['bare'] / best['grader']:.2f}")


if __name__ == "__main__":
    main()
