"""A code problem's tests, typed: what a dataset adapter produces and the code grader runs.

LiveCodeBench stores each problem's tests as two lists of ``{"input",
"output", "testtype"}`` objects (``public_test_cases`` plain JSON,
``private_test_cases`` base64(zlib(pickle(JSON string)))) plus
``metadata.func_name`` for LeetCode-style problems; its runner flattens them
into one ``{"inputs": [...], "outputs": [...], "fn_name": ...}`` sample,
public tests first (``CodeGenerationProblem.get_evaluation_sample`` in
lcb_runner/benchmarks/code_generation.py of github.com/LiveCodeBench/LiveCodeBench).
:class:`CodeTests` is that sample, decoded and checked once when the dataset
is read, so the grader never parses a hub format and a broken row is refused
with its row number instead of scoring 0 at grading time.

Test kinds (LiveCodeBench's ``TestType``):

- ``stdin``: ``input`` is fed to the program's standard input, ``output`` is
  the expected standard output (compared after whitespace normalisation).
- ``functional``: ``input`` is newline-separated JSON values, the positional
  arguments of ``fn_name`` (a method of the starter code's ``Solution``
  class), and ``output`` is the JSON of the expected return value.

The record carries the tests in its ground truth under :data:`CODE_TESTS_KEY`
as plain JSON (:meth:`CodeTests.to_json`), so they survive the results file
and a resumed eval; :func:`code_tests_of` reads them back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

__all__ = [
    "CODE_TESTS_KEY",
    "DEFAULT_TIME_LIMIT_S",
    "MAX_TESTS",
    "TEST_TYPES",
    "CodeTest",
    "CodeTests",
    "TestType",
    "code_tests_of",
    "too_many_tests",
]

TestType = Literal["stdin", "functional"]
TEST_TYPES: tuple[TestType, ...] = ("stdin", "functional")

CODE_TESTS_KEY = "code_tests"
"""The ground-truth key of a code record's tests: ``{"code_tests": {...}}``."""

DEFAULT_TIME_LIMIT_S = 6.0
"""Seconds per test: LiveCodeBench's default (``--timeout 6``, lcb_runner/runner/parser.py)."""

MAX_TESTS = 10_000
"""The most tests one problem may have (LiveCodeBench's have tens to a few hundred).

Checked before the tests are built (a dataset row of 4 million tests used to
load, 1.7 GB at its peak, and would then have run them all); the dataset
adapters count them while the test list is parsed.
"""


def too_many_tests(count: int) -> str:
    """The one message for a problem over :data:`MAX_TESTS`."""
    return f"{count} tests: more than {MAX_TESTS} per problem"


@dataclass(frozen=True, slots=True)
class CodeTest:
    """One test: ``input`` given, ``output`` expected, run as ``testtype``."""

    input: str
    output: str
    testtype: TestType
    public: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.input, str) or not isinstance(self.output, str):
            raise ValueError("a code test's input and output must be strings")
        if self.testtype not in TEST_TYPES:
            raise ValueError(
                f"unknown test type {self.testtype!r}; expected one of {', '.join(TEST_TYPES)}"
            )

    @classmethod
    def from_json(cls, item: object, where: str, *, public: bool | None = None) -> CodeTest:
        """One ``{"input", "output", "testtype"[, "public"]}`` object; ValueError names ``where``.

        ``public`` given overrides the object's own (a LiveCodeBench column is
        public or private as a whole); else the object's ``"public"``, default True.
        Both readers of tests (:meth:`CodeTests.from_json`, the LiveCodeBench
        adapter) go through here, so a broken test is named the same way.
        """
        if not isinstance(item, Mapping):
            raise ValueError(f"{where} is a {type(item).__name__}, not a test object")
        try:
            return cls(
                input=item["input"],
                output=item["output"],
                testtype=cast(TestType, item["testtype"]),
                public=bool(item.get("public", True)) if public is None else public,
            )
        except KeyError as exc:
            raise ValueError(f"{where} has no {exc.args[0]!r}") from None
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None


@dataclass(frozen=True, slots=True)
class CodeTests:
    """Every test of one problem, public first, and how to call the solution.

    ``fn_name`` is set for functional problems (LiveCodeBench's
    ``metadata.func_name``) and None for stdin ones; ``starter_code`` is the
    class/method skeleton shown to the model (empty for stdin problems);
    ``time_limit_s`` bounds each test, not the whole problem. A solution
    passes only if every test passes.
    """

    tests: tuple[CodeTest, ...]
    fn_name: str | None = None
    starter_code: str = ""
    time_limit_s: float = DEFAULT_TIME_LIMIT_S

    def __post_init__(self) -> None:
        if not self.tests:
            raise ValueError("a code problem needs at least one test")
        if len(self.tests) > MAX_TESTS:
            raise ValueError(too_many_tests(len(self.tests)))
        if any(t.testtype == "functional" for t in self.tests) and not self.fn_name:
            raise ValueError("functional tests need the function name (metadata.func_name)")
        limit = self.time_limit_s
        if isinstance(limit, bool) or not isinstance(limit, int | float) or not limit > 0:
            raise ValueError(f"time_limit_s must be a positive number, got {limit!r}")

    @property
    def inputs(self) -> list[str]:
        return [t.input for t in self.tests]

    @property
    def outputs(self) -> list[str]:
        return [t.output for t in self.tests]

    @property
    def public_count(self) -> int:
        return sum(1 for t in self.tests if t.public)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (lists, dicts, strings, numbers) for a record's ground truth."""
        return {
            "tests": [
                {"input": t.input, "output": t.output, "testtype": t.testtype, "public": t.public}
                for t in self.tests
            ],
            "fn_name": self.fn_name,
            "starter_code": self.starter_code,
            "time_limit_s": self.time_limit_s,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CodeTests:
        """The inverse of :meth:`to_json`; raises ValueError naming what is wrong."""
        if not isinstance(data, Mapping):
            raise ValueError(f"code tests must be an object, got {type(data).__name__}")
        raw = data.get("tests")
        if not isinstance(raw, Sequence) or isinstance(raw, str):
            raise ValueError("code tests need a 'tests' list")
        if len(raw) > MAX_TESTS:
            raise ValueError(too_many_tests(len(raw)))
        tests = [CodeTest.from_json(item, f"test {i}") for i, item in enumerate(raw)]
        fn_name = data.get("fn_name")
        if fn_name is not None and not isinstance(fn_name, str):
            raise ValueError(f"fn_name must be a string, got {type(fn_name).__name__}")
        starter = data.get("starter_code") or ""
        if not isinstance(starter, str):
            raise ValueError(f"starter_code must be a string, got {type(starter).__name__}")
        return cls(
            tests=tuple(tests),
            fn_name=fn_name or None,
            starter_code=starter,
            time_limit_s=data.get("time_limit_s", DEFAULT_TIME_LIMIT_S),
        )


def code_tests_of(ground_truth: Any) -> CodeTests | None:
    """The tests in a record's ground truth, or None when it carries none.

    Raises ValueError when the key is there but its value is not valid
    tests (a grader turns that into an unparsed grade with the reason).
    """
    if isinstance(ground_truth, CodeTests):
        return ground_truth
    if not isinstance(ground_truth, Mapping) or CODE_TESTS_KEY not in ground_truth:
        return None
    return CodeTests.from_json(ground_truth[CODE_TESTS_KEY])
