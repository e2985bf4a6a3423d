r"""Evaluation datasets in the ``pacore run`` JSONL format, and the shipped fixture.

The paper's synthetic large-integer arithmetic is the cleanest probe of
test-time scaling: answers are exact, cannot be guessed, and a single chain
of thought often slips one digit, which parallel exploration plus synthesis
can catch. :func:`arithmetic_problems` reproduces it (operands uniform in
[10^11, 10^13]; addition, subtraction, multiplication and modular
exponentiation modulo a fixed prime); :func:`easy_arithmetic_problems` is the
same generator with two-digit operands, for models too small for the real one.

Every record is one line of the format :func:`pacore_graph.runs.runner.read_dataset`
reads::

    {"id": "arith-0-3", "messages": [{"role": "user", "content": "What is ... \\boxed{}."}],
     "ground_truth": {"answer": "123"}, "category": "math", "op": "mul"}

Generation is a pure function of its arguments: the same seed gives the same
file byte for byte, on any machine (a private :class:`random.Random`, never
the global one).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from pacore_graph.runs.atomic import write_lines_atomic
from pacore_graph.runs.jsonl import BadLine, read_lines

__all__ = [
    "ARITHMETIC_OPS",
    "DATASET_KINDS",
    "DEFAULT_MODULUS",
    "EASY_ARITHMETIC_OPS",
    "arithmetic_problems",
    "easy_arithmetic_problems",
    "generate_dataset",
    "load_jsonl",
    "sample_questions_path",
    "write_jsonl",
]

DEFAULT_MODULUS = 2**61 - 1
"""The Mersenne prime 2^61 - 1 = 2305843009213693951.

Larger than every operand of the default range, so ``a^b mod p`` is a real
reduction, and a well-known prime, so the question text names a number a
reader can check.
"""

ARITHMETIC_OPS: tuple[str, ...] = ("add", "sub", "mul", "modexp")
EASY_ARITHMETIC_OPS: tuple[str, ...] = ("add", "sub", "mul")
DATASET_KINDS: tuple[str, ...] = ("arithmetic", "easy-arithmetic")

_INSTRUCTION = "Put your final answer in \\boxed{}."
SAMPLE_QUESTIONS_FILE = "pacore_sample_questions.jsonl"


def _question(op: str, a: int, b: int, modulus: int) -> tuple[str, int]:
    """The question text and its exact answer."""
    if op == "add":
        return f"What is {a} + {b}?", a + b
    if op == "sub":
        return f"What is {a} - {b}?", a - b
    if op == "mul":
        return f"What is {a} × {b}?", a * b
    if op == "modexp":
        return (
            f"What is the remainder when {a}^{b} (that is, {a} raised to the power {b}) "
            f"is divided by {modulus}?",
            pow(a, b, modulus),
        )
    raise ValueError(f"unknown arithmetic op {op!r}; choose from {', '.join(ARITHMETIC_OPS)}")


def _check_n(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of problems must be an integer >= 1, got {n!r}")


def _generate(
    prefix: str,
    n: int,
    seed: int,
    *,
    low: int,
    high: int,
    ops: Sequence[str],
    modulus: int,
) -> Iterator[dict[str, Any]]:
    """Problems one at a time (arguments checked now, before the first is asked for).

    An iterator, so ``pacore data --n 100000000`` streams to disk in bounded
    memory instead of building the whole list first.
    """
    _check_n(n)
    if isinstance(ops, str):
        raise TypeError(f"ops must be a sequence of op names, not the string {ops!r}")
    ops = tuple(ops)
    if not ops:
        raise ValueError(f"ops must name at least one of {', '.join(ARITHMETIC_OPS)}")
    unknown = [op for op in ops if op not in ARITHMETIC_OPS]
    if unknown:
        raise ValueError(
            f"unknown arithmetic op(s) {', '.join(map(repr, unknown))}; "
            f"choose from {', '.join(ARITHMETIC_OPS)}"
        )
    if not 0 <= low <= high:
        raise ValueError(f"operand range must satisfy 0 <= low <= high, got [{low}, {high}]")
    if "modexp" in ops and modulus < 2:
        raise ValueError(f"modexp needs a modulus >= 2, got {modulus}")
    return _problems(prefix, n, seed, low=low, high=high, ops=ops, modulus=modulus)


def _problems(
    prefix: str, n: int, seed: int, *, low: int, high: int, ops: Sequence[str], modulus: int
) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    for i in range(n):
        op = ops[i % len(ops)]
        a = rng.randint(low, high)
        b = rng.randint(low, high)
        question, answer = _question(op, a, b, modulus)
        yield {
            "id": f"{prefix}-{seed}-{i}",
            "messages": [{"role": "user", "content": f"{question} {_INSTRUCTION}"}],
            "ground_truth": {"answer": str(answer)},
            "category": "math",
            "op": op,
        }


def arithmetic_problems(
    n: int,
    seed: int,
    *,
    low: int = 10**11,
    high: int = 10**13,
    ops: Sequence[str] = ARITHMETIC_OPS,
    modulus: int = DEFAULT_MODULUS,
) -> list[dict[str, Any]]:
    """``n`` large-integer arithmetic problems with exact answers, reproducible by ``seed``.

    Both operands are drawn uniformly from [low, high] (inclusive). Ops go
    round-robin through ``ops``, so every op gets n/len(ops) problems (give
    an op twice to weight it): per-op accuracies are then comparable between
    runs, which uniform sampling would not guarantee for small n. ``modexp``
    asks for ``a^b mod modulus``; ``sub`` answers are negative when b > a.
    """
    return list(_generate("arith", n, seed, low=low, high=high, ops=ops, modulus=modulus))


def easy_arithmetic_problems(n: int, seed: int) -> list[dict[str, Any]]:
    """The same generator with operands in [1, 99] and add/sub/mul only, for tiny models.

    A 135M-parameter model cannot multiply 12-digit numbers at any budget, so
    a scaling curve on the real set would be flat at zero; two-digit problems
    leave room for both mistakes and their correction.
    """
    return list(_easy(n, seed))


def _arith(n: int, seed: int) -> Iterator[dict[str, Any]]:
    return _generate(
        "arith", n, seed, low=10**11, high=10**13, ops=ARITHMETIC_OPS, modulus=DEFAULT_MODULUS
    )


def _easy(n: int, seed: int) -> Iterator[dict[str, Any]]:
    return _generate(
        "easy", n, seed, low=1, high=99, ops=EASY_ARITHMETIC_OPS, modulus=DEFAULT_MODULUS
    )


_GENERATORS: dict[str, Callable[[int, int], Iterator[dict[str, Any]]]] = {
    "arithmetic": _arith,
    "easy-arithmetic": _easy,
}


def write_jsonl(records: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    """Write one JSON object per line; return how many.

    The file appears complete or not at all (written beside it, then
    renamed), so an interrupted generation never leaves a half dataset that a
    later eval would silently run on. Parent directories are created.
    """
    return write_lines_atomic(path, (json.dumps(record, ensure_ascii=False) for record in records))


def load_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSONL file of objects; blank lines are skipped.

    Strict, unlike :func:`~pacore_graph.runs.runner.read_dataset` (which skips bad
    lines and reports them): this is for files this module wrote or ships, so
    a bad line is a broken file and raises with its line number.
    """
    records: list[dict[str, Any]] = []
    for item in read_lines(path):
        if isinstance(item, BadLine):
            raise ValueError(f"{path}:{item.line}: {item.reason}")
        records.append(item.data)
    return records


def generate_dataset(kind: str, n: int, seed: int, out: Path) -> int:
    """Write ``n`` problems of ``kind`` to ``out`` (the ``pacore data`` command); return n.

    ``kind`` is ``arithmetic`` (the paper's large-integer set) or
    ``easy-arithmetic`` (two-digit operands).
    """
    generator = _GENERATORS.get(kind)
    if generator is None:
        raise ValueError(f"unknown dataset kind {kind!r}; choose {' or '.join(DATASET_KINDS)}")
    _check_n(n)
    return write_jsonl(generator(n, seed), out)


def sample_questions_path() -> Path:
    """The public PaCoRe pipeline's five sample questions, shipped with the package.

    A quick smoke set: math, logic, code (no ground truth) and physics, with
    answers such as "32 cm²" and "20 meters" that exercise unit handling.
    """
    resource = resources.files(__package__ or "pacore_graph.eval") / "data" / SAMPLE_QUESTIONS_FILE
    if not isinstance(resource, Path) or not resource.is_file():
        raise FileNotFoundError(
            f"package data file data/{SAMPLE_QUESTIONS_FILE} of pacore_graph.eval is missing; "
            "reinstall pacore-graph (the file must be listed as package data)"
        )
    return resource
