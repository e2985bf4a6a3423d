"""``--grader code``: run the answer's program against the problem's tests, in the sandbox.

A solution scores 1 only if every test passes (LiveCodeBench's rule; see
:mod:`.code_compare` for how outputs are compared and :mod:`.code_programs`
for what runs). Each test is one call of :class:`~pacore_graph.tools.sandbox.LocalSandbox`
with the test's input on stdin, a per-test time limit and the sandbox's
memory, process, file, output and network limits; the expected output never
enters the sandbox, the parent compares. Tests of one answer run in order
and stop at the first failure (as LiveCodeBench's runner does), up to
``workers`` sandbox calls at once across every answer being graded.

The grade's ``info`` keeps what a report needs: how many tests there were,
how many ran and passed, and the first failure's kind (:data:`FAILURE_KINDS`)
and detail. Like every grader it never raises: a sandbox that cannot run is
a score-0 grade whose detail says so (``sandbox_error``), and a test the
dataset wrote badly is ``bad_test``.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pacore_graph.eval.code_answer import extract_code
from pacore_graph.eval.code_compare import stdout_mismatch, value_matches
from pacore_graph.eval.code_programs import (
    functional_program,
    parse_functional_output,
    stdin_program,
)
from pacore_graph.eval.code_tests import (
    CODE_TESTS_KEY,
    DEFAULT_TIME_LIMIT_S,
    MAX_TESTS,
    CodeTest,
    CodeTests,
    code_tests_of,
    too_many_tests,
)
from pacore_graph.eval.grade import Grade, describe_error
from pacore_graph.runs.jsonl import TooManyObjects, loads_bounded
from pacore_graph.tools.sandbox import (
    MIB,
    ExecRequest,
    ExecResult,
    LocalSandbox,
    SandboxError,
    SandboxLimits,
)

__all__ = [
    "DEFAULT_TIME_LIMIT_S",
    "FAILURE_KINDS",
    "CodeGrader",
    "TestOutcome",
    "code_test_suite",
    "default_code_limits",
]

STARTUP_ALLOWANCE_S = 1.0
"""Wall time added to each test's limit for starting the interpreter.

LiveCodeBench's alarm starts after the solution is compiled in a warm
process; ours starts with a fresh one, which costs 50-300 ms here.
"""

FAILURE_KINDS = (
    "no_code",
    "wrong_answer",
    "runtime_error",
    "time_limit",
    "memory_limit",
    "output_limit",
    "bad_test",
    "sandbox_error",
)
"""Why an answer failed, as recorded in ``info["first_failure"]["kind"]``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TestOutcome:
    """What one test gave: passed, or the failure's kind and a short reason."""

    index: int
    passed: bool
    kind: str | None = None
    detail: str = ""


def _raw_tests(value: Any, public: bool) -> list[CodeTest]:
    """LiveCodeBench's already-decoded test list (a list, or its JSON text)."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        try:
            value = loads_bounded(value, MAX_TESTS)  # one object per test: stops past the cap
        except TooManyObjects:
            raise ValueError(f"more than {MAX_TESTS} tests per problem") from None
    if not isinstance(value, list):
        raise ValueError(f"tests must be a list, got {type(value).__name__}")
    if len(value) > MAX_TESTS:
        raise ValueError(too_many_tests(len(value)))
    return [
        CodeTest(
            input=str(item["input"]),
            output=str(item["output"]),
            testtype=item.get("testtype", "stdin"),
            public=public,
        )
        for item in value
    ]


def code_test_suite(ground_truth: Any) -> CodeTests:
    """A record's tests, whichever shape the dataset gave them; ``ValueError`` naming what is wrong.

    Accepted: :class:`~pacore_graph.eval.code_tests.CodeTests` or the ground
    truth the dataset adapters write (``{"code_tests": {...}}``,
    :func:`~pacore_graph.eval.code_tests.code_tests_of`); that object's JSON
    itself (``{"tests": [...], "fn_name": ...}``); or a mapping of
    LiveCodeBench's own columns, already decoded: ``public_test_cases`` and
    ``private_test_cases`` (lists or JSON text) and ``metadata`` (a mapping
    or JSON text with ``func_name``).
    """
    found = code_tests_of(ground_truth)
    if found is not None:
        return found
    if not isinstance(ground_truth, Mapping):
        raise ValueError(
            f"the record's ground truth holds no code tests (a {type(ground_truth).__name__})"
        )
    if "tests" in ground_truth:
        return CodeTests.from_json(ground_truth)
    if "public_test_cases" not in ground_truth and "private_test_cases" not in ground_truth:
        raise ValueError(f"the record's ground truth has no {CODE_TESTS_KEY!r}")
    tests = _raw_tests(ground_truth.get("public_test_cases"), True) + _raw_tests(
        ground_truth.get("private_test_cases"), False
    )
    metadata = ground_truth.get("metadata") or {}
    if isinstance(metadata, str):
        metadata = json.loads(metadata) if metadata.strip() else {}
    return CodeTests(
        tests=tuple(tests),
        fn_name=metadata.get("func_name") or None,
        time_limit_s=float(ground_truth.get("time_limit_s", DEFAULT_TIME_LIMIT_S)),
    )


def default_code_limits() -> SandboxLimits:
    """The sandbox limits of one test, before its time limit is applied.

    2 GiB of address space per process (a solution importing numpy reserves
    far more than it uses) and 2 GiB resident for all its processes, 64
    processes, 16 MiB per file, no network. Output is capped per test at
    twice the expected output plus 64 KiB (at least 1 MiB), so an endless
    printer is stopped early.
    """
    return SandboxLimits(
        wall_time_s=DEFAULT_TIME_LIMIT_S + STARTUP_ALLOWANCE_S,
        cpu_time_s=math.ceil(DEFAULT_TIME_LIMIT_S) + 1,
        memory_bytes=2048 * MIB,
        max_total_memory_bytes=2048 * MIB,
        max_workspace_bytes=64 * MIB,
    )


_KILLED_KIND = {
    "wall_time": "time_limit",
    "cpu_time": "time_limit",
    "memory": "memory_limit",
    "total_memory": "memory_limit",
    "output_limit": "output_limit",
}


def _failure_of(result: ExecResult) -> tuple[str, str] | None:
    """A run that did not end cleanly: its failure kind and reason, else None."""
    if result.killed_by is not None:
        return _KILLED_KIND.get(result.killed_by, "runtime_error"), result.summary()
    if result.exit_code != 0:
        tail = result.stderr.strip().splitlines()[-1:] or [""]
        return "runtime_error", f"exit code {result.exit_code}: {tail[0][:200]}"
    return None


class CodeGrader:
    """Grades code answers by running them against their tests (see the module docstring).

    ``workers`` bounds the sandbox calls in flight across every ``grade``
    call of this grader (``--grader-workers``; default 2, this machine's
    cores). ``time_limit_s``, when given, replaces every record's
    per-test limit (LiveCodeBench's 6 s by default). ``limits`` replaces
    :func:`default_code_limits`. ``stop_at_first_failure`` (default,
    LiveCodeBench's rule) skips the remaining tests once one fails; with
    False every test runs, so ``info["passed"]`` is the pass rate's numerator.
    ``partial_credit`` runs every test and scores the pass rate itself: the
    RL reward the paper found finer-grained than pass/fail (give
    ``CodeGrader(partial_credit=True)`` to the RL rewards; evals keep 0/1).

    The sandbox starts on first use and is shared by every call; the grader
    is safe to call from many threads at once.
    """

    name = "code"

    def __init__(
        self,
        *,
        workers: int = 2,
        time_limit_s: float | None = None,
        limits: SandboxLimits | None = None,
        stop_at_first_failure: bool = True,
        partial_credit: bool = False,
        sandbox: LocalSandbox | None = None,
    ) -> None:
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
        if time_limit_s is not None and not time_limit_s > 0:
            raise ValueError(f"time_limit_s must be positive, got {time_limit_s!r}")
        self.workers = workers
        self.time_limit_s = float(time_limit_s) if time_limit_s is not None else None
        self.limits = limits if limits is not None else default_code_limits()
        self.partial_credit = partial_credit
        self.stop_at_first_failure = stop_at_first_failure and not partial_credit
        self._slots = threading.BoundedSemaphore(workers)
        self._lock = threading.Lock()
        self._sandbox = sandbox
        self._owns_sandbox = sandbox is None

    def _get_sandbox(self) -> LocalSandbox:
        with self._lock:
            if self._sandbox is None:
                self._sandbox = LocalSandbox(
                    self.limits, extra_env={"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
                )
            return self._sandbox

    def close(self) -> None:
        """Shut the sandbox this grader started down (one it was given is left alone)."""
        with self._lock:
            if self._sandbox is not None and self._owns_sandbox:
                self._sandbox.shutdown()
                self._sandbox = None

    def __enter__(self) -> CodeGrader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ grading

    def grade(self, response: str, ground_truth: Any, problem: str | None = None) -> Grade:
        try:
            return self._grade(response, ground_truth)
        except Exception as exc:  # the promise: never raise
            return Grade(
                0.0,
                False,
                detail=f"code grader error: {describe_error(exc)}",
                info={"first_failure": {"kind": "sandbox_error", "detail": describe_error(exc)}},
            )

    def _grade(self, response: str, ground_truth: Any) -> Grade:
        try:
            suite = code_test_suite(ground_truth)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            failure = {"test": None, "kind": "bad_test", "detail": describe_error(exc)}
            return Grade(0.0, False, detail=f"bad_test: {exc}", info={"first_failure": failure})
        total = len(suite.tests)
        code = extract_code(response) if isinstance(response, str) else None
        if code is None:
            no_code = {"test": None, "kind": "no_code", "detail": "no fenced code"}
            return Grade(
                0.0,
                False,
                expected=f"{total} tests",
                detail="no_code: the answer has no fenced code block",
                info={"tests": total, "ran": 0, "passed": 0, "first_failure": no_code},
            )
        outcomes = self._run_all(code, suite)
        ran = [o for o in outcomes if o is not None]
        passed = sum(o.passed for o in ran)
        first = next((o for o in sorted(ran, key=lambda o: o.index) if not o.passed), None)
        info: dict[str, Any] = {"tests": total, "ran": len(ran), "passed": passed}
        if first is not None:
            info["first_failure"] = {
                "test": first.index,
                "kind": first.kind,
                "detail": first.detail,
            }
            detail = (
                f"passed {passed}/{total} tests; first failure: {first.kind} on test "
                f"{first.index + 1}: {first.detail}"
            )
        else:
            detail = f"passed {total}/{total} tests"
        score = passed / total if self.partial_credit else float(passed == total)
        return Grade(
            score,
            True,
            extracted=code[:4000],
            expected=f"{total} tests",
            detail=detail[:500],
            info=info,
        )

    def _run_all(self, code: str, suite: CodeTests) -> list[TestOutcome | None]:
        """Every test's outcome in order; None for a test skipped after a failure."""
        failed = threading.Event()
        stop = self.stop_at_first_failure

        def run(index: int) -> TestOutcome | None:
            with self._slots:
                if stop and failed.is_set():
                    return None
                outcome = self._run_one(index, code, suite)
            if not outcome.passed:
                failed.set()
            return outcome

        if self.workers == 1 or len(suite.tests) == 1:
            results: list[TestOutcome | None] = []
            for i in range(len(suite.tests)):
                results.append(run(i))
            return results
        with ThreadPoolExecutor(max_workers=min(self.workers, len(suite.tests))) as pool:
            return list(pool.map(run, range(len(suite.tests))))

    def _limits_for(self, suite: CodeTests, expected: str) -> SandboxLimits:
        limit = self.time_limit_s or suite.time_limit_s or DEFAULT_TIME_LIMIT_S
        return self.limits.replace(
            wall_time_s=limit + STARTUP_ALLOWANCE_S,
            cpu_time_s=math.ceil(limit) + 1,
            max_output_bytes=max(self.limits.max_output_bytes, 2 * len(expected) + 64 * 1024),
        )

    def _run_one(self, index: int, code: str, suite: CodeTests) -> TestOutcome:
        test = suite.tests[index]
        try:
            if test.testtype == "functional":
                args = [json.loads(line) for line in test.input.split("\n") if line.strip()]
                expected_value = json.loads(test.output)
                program = functional_program(code, suite.fn_name or "")
                stdin = json.dumps(args)
            else:
                program, stdin = stdin_program(code), test.input
        except ValueError as exc:
            return TestOutcome(index=index, passed=False, kind="bad_test", detail=str(exc)[:200])
        request = ExecRequest(
            code=program, stdin=stdin, limits=self._limits_for(suite, test.output)
        )
        try:
            result = self._get_sandbox().execute(request)
        except SandboxError as exc:
            return TestOutcome(
                index=index, passed=False, kind="sandbox_error", detail=describe_error(exc)
            )
        failure = _failure_of(result)
        if failure is not None:
            return TestOutcome(index=index, passed=False, kind=failure[0], detail=failure[1])
        if test.testtype == "functional":
            ok, value = parse_functional_output(result.stdout)
            if not ok:
                return TestOutcome(index=index, passed=False, kind="runtime_error", detail=value)
            if value_matches(value, expected_value):
                return TestOutcome(index=index, passed=True)
            return TestOutcome(
                index=index,
                passed=False,
                kind="wrong_answer",
                detail=f"returned {json.dumps(value)[:80]}, expected {test.output[:80]}",
            )
        mismatch = stdout_mismatch(result.stdout, test.output)
        if mismatch is None:
            return TestOutcome(index=index, passed=True)
        return TestOutcome(index=index, passed=False, kind="wrong_answer", detail=mismatch)
