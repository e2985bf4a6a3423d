"""LiveCodeBench code generation (``livecodebench/code_generation_lite``), tests decoded safely.

The hub layout, one row per problem (``CodeGenerationProblem`` in
lcb_runner/benchmarks/code_generation.py of github.com/LiveCodeBench/LiveCodeBench):
``question_title``, ``question_content``, ``platform`` (leetcode, codeforces,
atcoder), ``question_id``, ``contest_id``, ``contest_date`` (ISO timestamp),
``starter_code`` (empty for stdin problems), ``difficulty``,
``public_test_cases`` (a JSON string of ``{input, output, testtype}``),
``private_test_cases`` (the same list as JSON text, or base64(zlib(pickle(JSON
text))) in the lite release) and ``metadata`` (JSON text with ``func_name``
for functional problems). The repository's data are ``test.jsonl`` ...
``test6.jsonl`` (release_v1 ... v6) beside a loading script that ``datasets``
4.0+ refuses to run, so by name the files are fetched as files
(:class:`~pacore_graph.eval.benchmarks.base.HubFiles`).

The prompt is LiveCodeBench's generic one (``get_generic_question_template_answer``
in lcb_runner/prompts/code_generation.py): the question, then the starter code
to complete or the stdin/stdout instruction, code in a fenced block.
``--since``/``--until`` keep problems by ``contest_date`` (both days
inclusive), as ``load_code_generation_dataset(start_date, end_date)`` does; the
paper's window is 2024-08-01 .. 2025-05-31 (:data:`PAPER_WINDOW`).
Private tests are unpickled with :func:`pacore_graph.eval.safe_pickle.decode_compressed_pickle`
(text, lists and dicts only; the field is one pickled JSON text): a dataset
cannot run code on the grading machine.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

from pacore_graph.eval.benchmarks.base import (
    Benchmark,
    BenchmarkOptions,
    HubFiles,
    Skip,
    cell_text,
    parse_day,
)
from pacore_graph.eval.code_tests import (
    CODE_TESTS_KEY,
    MAX_TESTS,
    CodeTest,
    CodeTests,
    too_many_tests,
)
from pacore_graph.eval.safe_pickle import UnsafePickleError, decode_compressed_pickle
from pacore_graph.runs.jsonl import TooManyObjects, loads_bounded

__all__ = ["LIVECODEBENCH", "LIVECODEBENCH_FILES", "PAPER_WINDOW", "LiveCodeBench", "lcb_prompt"]

LIVECODEBENCH_FILES = tuple(f"test{n}.jsonl" if n > 1 else "test.jsonl" for n in range(1, 7))
"""release_v6 = every file (release_v1 is test.jsonl, each later release adds one)."""

PAPER_WINDOW = (date(2024, 8, 1), date(2025, 5, 31))
"""The paper's LiveCodeBench window "2408-2505": ``--since 2024-08-01 --until 2025-05-31``."""

_WITH_STARTER = (
    "You will use the following starter code to write the solution to the problem "
    "and enclose your code within delimiters."
)
_WITHOUT_STARTER = (
    "Read the inputs from stdin solve the problem and write the answer to stdout "
    "(do not directly test on the sample inputs). Enclose your code within delimiters "
    "as follows. Ensure that when the python program runs, it reads the inputs, runs "
    "the algorithm and writes output to STDOUT."
)


def lcb_prompt(question: str, starter_code: str) -> str:
    """LiveCodeBench's generic code-generation prompt, word for word."""
    prompt = f"### Question:\n{question}\n\n"
    if starter_code:
        prompt += f"### Format: {_WITH_STARTER}\n```python\n{starter_code}\n```\n\n"
    else:
        prompt += f"### Format: {_WITHOUT_STARTER}\n```python\n# YOUR CODE HERE\n```\n\n"
    return prompt + "### Answer: (use the provided format with backticks)\n\n"


class _TooManyTests(ValueError):
    pass


def _parse_tests(text: str, column: str) -> Any:
    """JSON text of a test list, parsing stopped past :data:`MAX_TESTS` objects (one per test)."""
    try:
        return loads_bounded(text, MAX_TESTS)
    except TooManyObjects:
        raise _TooManyTests(f"column {column!r} holds more than {MAX_TESTS} tests") from None


def _test_list(value: Any, column: str, *, compressed: bool) -> list[Any]:
    """A test column as a list: JSON text, else (private tests) the compressed pickle."""
    if isinstance(value, list):
        return value
    if not isinstance(value, str):
        raise ValueError(f"column {column!r} is {type(value).__name__}, not text")
    try:
        decoded: Any = _parse_tests(value, column)
    except _TooManyTests:
        raise
    except ValueError:
        if not compressed:
            raise ValueError(f"column {column!r} is not JSON") from None
        try:
            inner = decode_compressed_pickle(value)
        except UnsafePickleError as exc:  # the loader names the row
            raise UnsafePickleError(f"column {column!r}: {exc}") from None
        if not isinstance(inner, str):
            raise ValueError(
                f"column {column!r} unpickles to a {type(inner).__name__}, not JSON text"
            ) from None
        try:
            decoded = _parse_tests(inner, column)
        except _TooManyTests:
            raise
        except ValueError as exc:
            raise ValueError(
                f"column {column!r} unpickles to text that is not JSON ({exc})"
            ) from None
    if not isinstance(decoded, list):
        raise ValueError(f"column {column!r} holds a {type(decoded).__name__}, not a list of tests")
    return decoded


def _tests(items: list[Any], column: str, *, public: bool) -> list[CodeTest]:
    if len(items) > MAX_TESTS:
        raise ValueError(f"column {column!r}: {too_many_tests(len(items))}")
    return [
        CodeTest.from_json(item, f"{column}[{i}]", public=public) for i, item in enumerate(items)
    ]


@dataclass(frozen=True, slots=True)
class LiveCodeBench(Benchmark):
    """One record per problem; the ground truth is every test, public first."""

    def keep(self, row: Mapping[str, Any], options: BenchmarkOptions) -> bool:
        if options.since is None and options.until is None:
            return True
        day = parse_day(row.get("contest_date"), "contest_date")
        if options.since is not None and day < options.since:
            return False
        return options.until is None or day <= options.until

    def record(self, row: Mapping[str, Any], number: int) -> dict[str, Any] | Skip:
        question_id = cell_text(row, "question_id").strip()
        question = cell_text(row, "question_content")
        starter = row.get("starter_code") or ""
        if not isinstance(starter, str):
            raise ValueError(f"column 'starter_code' is {type(starter).__name__}, not text")
        metadata = row.get("metadata") or "{}"
        if isinstance(metadata, str):
            try:
                metadata = json.loads(metadata)
            except ValueError:
                raise ValueError("column 'metadata' is not JSON") from None
        if not isinstance(metadata, Mapping):
            raise ValueError("column 'metadata' is not a JSON object")
        public = _tests(
            _test_list(row.get("public_test_cases"), "public_test_cases", compressed=False),
            "public_test_cases",
            public=True,
        )
        private = _tests(
            _test_list(row.get("private_test_cases"), "private_test_cases", compressed=True),
            "private_test_cases",
            public=False,
        )
        fn_name = metadata.get("func_name")
        tests = CodeTests(
            tests=(*public, *private),
            fn_name=fn_name if isinstance(fn_name, str) and fn_name else None,
            starter_code=starter,
        )
        contest_date = row.get("contest_date")
        return {
            "id": question_id,
            "messages": [{"role": "user", "content": lcb_prompt(question, starter)}],
            "ground_truth": {CODE_TESTS_KEY: tests.to_json()},
            "category": "code",
            "title": row.get("question_title"),
            "platform": row.get("platform"),
            "difficulty": row.get("difficulty"),
            "contest_date": None if contest_date is None else str(contest_date),
        }


LIVECODEBENCH = LiveCodeBench(
    name="livecodebench",
    description="LiveCodeBench code generation, release_v6 (livecodebench/code_generation_lite)",
    hub=HubFiles("livecodebench/code_generation_lite", LIVECODEBENCH_FILES),
    columns=("question_id", "question_content", "public_test_cases", "private_test_cases"),
    optional_columns=(
        "question_title",
        "platform",
        "contest_id",
        "contest_date",
        "starter_code",
        "difficulty",
        "metadata",
    ),
    dated=True,
)
