"""Datasets: the synthetic arithmetic generators, JSONL helpers and the shipped fixture."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pacore_graph.eval import (
    DEFAULT_MODULUS,
    MathGrader,
    arithmetic_problems,
    easy_arithmetic_problems,
    generate_dataset,
    load_jsonl,
    sample_questions_path,
    write_jsonl,
)
from pacore_graph.runs.runner import read_dataset

QUESTION = re.compile(
    r"^What is (?:(?P<a>\d+) (?P<sym>[-+×]) (?P<b>\d+)\?"
    r"|the remainder when (?P<base>\d+)\^(?P<exp>\d+) \(that is, \d+ raised to the power \d+\) "
    r"is divided by (?P<mod>\d+)\?) Put your final answer in \\boxed\{\}\.$"
)


def operands(record: dict[str, Any]) -> tuple[str, int, int, int | None]:
    """(op, a, b, modulus) read back from the question text the model sees."""
    content = record["messages"][0]["content"]
    match = QUESTION.match(content)
    assert match, content
    if match["base"] is not None:
        return "modexp", int(match["base"]), int(match["exp"]), int(match["mod"])
    op = {"+": "add", "-": "sub", "×": "mul"}[match["sym"]]
    return op, int(match["a"]), int(match["b"]), None


def recompute(op: str, a: int, b: int, modulus: int | None) -> int:
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    assert modulus is not None
    return pow(a, b, modulus)


def is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin: these bases decide every n < 3.3 * 10^24."""
    if n < 2:
        return False
    bases = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
    for p in bases:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in bases:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True


def test_the_primality_check_itself_is_right() -> None:
    small_primes = [n for n in range(2, 2000) if all(n % d for d in range(2, int(n**0.5) + 1))]
    assert [n for n in range(2000) if is_prime(n)] == small_primes
    assert is_prime(2**61 - 1) and is_prime(10**9 + 7)
    assert not is_prime(3215031751)  # strong pseudoprime to bases 2, 3, 5, 7
    assert not is_prime((2**31 - 1) * (2**61 - 1))


def test_default_modulus_is_a_large_prime() -> None:
    assert DEFAULT_MODULUS > 10**13  # larger than every default operand
    assert is_prime(DEFAULT_MODULUS)


def test_arithmetic_records_have_the_run_format() -> None:
    records = arithmetic_problems(8, seed=3)
    assert [r["id"] for r in records] == [f"arith-3-{i}" for i in range(8)]
    first = records[0]
    assert set(first) == {"id", "messages", "ground_truth", "category", "op"}
    assert first["category"] == "math"
    assert first["messages"][0]["role"] == "user"
    assert first["messages"][0]["content"].endswith(r"Put your final answer in \boxed{}.")
    assert isinstance(first["ground_truth"]["answer"], str)


def test_arithmetic_answers_are_exact_and_operands_in_range() -> None:
    low, high = 10**11, 10**13
    records = arithmetic_problems(200, seed=0)
    for record in records:
        op, a, b, modulus = operands(record)
        assert op == record["op"]
        assert low <= a <= high and low <= b <= high
        if modulus is not None:
            assert modulus == DEFAULT_MODULUS
        assert record["ground_truth"]["answer"] == str(recompute(op, a, b, modulus))
    answers = [int(r["ground_truth"]["answer"]) for r in records]
    assert any(x < 0 for x in answers)  # subtraction goes negative
    assert max(answers) > 10**22  # products of 12-13 digit operands are exact, not floats


def test_ops_go_round_robin() -> None:
    records = arithmetic_problems(10, seed=1)
    assert [r["op"] for r in records] == ["add", "sub", "mul", "modexp"] * 2 + ["add", "sub"]
    only = arithmetic_problems(6, seed=1, ops=("mul", "modexp"), low=5, high=9, modulus=13)
    assert Counter(r["op"] for r in only) == {"mul": 3, "modexp": 3}
    for record in only:
        op, a, b, modulus = operands(record)
        assert 5 <= a <= 9 and 5 <= b <= 9
        assert record["ground_truth"]["answer"] == str(recompute(op, a, b, modulus))


def test_generation_is_reproducible_by_seed(tmp_path: Path) -> None:
    assert arithmetic_problems(50, seed=7) == arithmetic_problems(50, seed=7)
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    generate_dataset("arithmetic", 50, 7, a)
    generate_dataset("arithmetic", 50, 7, b)
    assert a.read_bytes() == b.read_bytes()

    other = arithmetic_problems(50, seed=8)
    same = arithmetic_problems(50, seed=7)
    questions = {r["messages"][0]["content"] for r in same}
    assert not questions & {r["messages"][0]["content"] for r in other}
    # A prefix of a longer run is the shorter run.
    assert arithmetic_problems(60, seed=7)[:50] == same


def test_easy_arithmetic_is_small_and_exact() -> None:
    records = easy_arithmetic_problems(300, seed=2)
    assert [r["id"] for r in records[:3]] == ["easy-2-0", "easy-2-1", "easy-2-2"]
    assert {r["op"] for r in records} == {"add", "sub", "mul"}
    seen: set[int] = set()
    for record in records:
        op, a, b, modulus = operands(record)
        assert 1 <= a <= 99 and 1 <= b <= 99
        assert modulus is None
        assert record["ground_truth"]["answer"] == str(recompute(op, a, b, None))
        seen.update((a, b))
    assert min(seen) < 10 and max(seen) > 90  # spans the range
    assert easy_arithmetic_problems(20, seed=2) == records[:20]
    assert easy_arithmetic_problems(20, seed=3) != records[:20]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n": 0}, "integer >= 1"),
        ({"n": -3}, "integer >= 1"),
        ({"ops": ()}, "at least one"),
        ({"ops": ("add", "pow")}, "unknown arithmetic op.*'pow'"),
        ({"ops": "add"}, "not the string"),
        ({"low": 10, "high": 5}, "0 <= low <= high"),
        ({"modulus": 1}, "modulus >= 2"),
    ],
)
def test_arithmetic_argument_errors(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"n": 3, "seed": 0, **kwargs}
    with pytest.raises((ValueError, TypeError), match=message):
        arithmetic_problems(**args)


def test_generate_dataset_writes_a_file_read_dataset_accepts(tmp_path: Path) -> None:
    for kind, n in (("arithmetic", 12), ("easy-arithmetic", 9)):
        out = tmp_path / "nested" / f"{kind}.jsonl"
        assert generate_dataset(kind, n, 0, out) == n
        records, errors = read_dataset(out)
        assert errors == []
        assert len(records) == n
        assert all(r.ground_truth == {"answer": r.raw["ground_truth"]["answer"]} for r in records)
        assert load_jsonl(out) == [dict(r.raw) for r in records]
    assert not list(tmp_path.glob("nested/.*.tmp"))  # no temporary file left behind


def test_generate_dataset_errors(tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    with pytest.raises(ValueError, match="unknown dataset kind 'hard'; choose arithmetic or"):
        generate_dataset("hard", 5, 0, out)
    with pytest.raises(ValueError, match="integer >= 1"):
        generate_dataset("arithmetic", 0, 0, out)
    assert not out.exists()


def test_jsonl_round_trip_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    records: list[dict[str, Any]] = [
        {"id": "a", "text": "32 cm²"},
        {"id": "b", "n": 12345678901234567890123},
    ]
    assert write_jsonl(records, path) == 2
    assert load_jsonl(path) == records
    assert "32 cm²" in path.read_text(encoding="utf-8")  # readable, not \u-escaped

    path.write_text('{"id": "a"}\n\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"r\.jsonl:3: expected a JSON object"):
        load_jsonl(path)
    path.write_text('{"id": "a"}\n{"id": \n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"r\.jsonl:2: not valid JSON"):
        load_jsonl(path)


def test_sample_questions_fixture_ships_with_the_package() -> None:
    path = sample_questions_path()
    assert path.is_file()
    assert path.parent.name == "data" and path.parent.parent.name == "eval"
    records = load_jsonl(path)
    assert len(records) == 5
    assert [r["id"] for r in records] == [
        "math_001",
        "math_002",
        "logic_001",
        "code_001",
        "physics_001",
    ]
    parsed, errors = read_dataset(path)
    assert errors == [] and len(parsed) == 5


def test_sample_questions_grade_with_math_grader() -> None:
    records = {r["id"]: r for r in load_jsonl(sample_questions_path())}
    grader = MathGrader()
    assert grader.grade(r"\boxed{5050}", records["math_001"]["ground_truth"]).score == 1.0
    assert grader.grade(r"\boxed{32}", records["math_002"]["ground_truth"]).score == 1.0
    assert grader.grade("It rises 20 m.", records["physics_001"]["ground_truth"]).score == 1.0
    assert grader.grade(r"\boxed{\text{Box B}}", records["logic_001"]["ground_truth"]).score == 1.0
    assert "ground_truth" not in records["code_001"]


def test_generated_answers_grade_exactly() -> None:
    grader = MathGrader()
    for record in arithmetic_problems(8, seed=11) + easy_arithmetic_problems(6, seed=11):
        answer = int(record["ground_truth"]["answer"])
        truth = record["ground_truth"]
        right = grader.grade(f"The result is \\boxed{{{answer}}}.", truth)
        assert (right.score, right.parsed) == (1.0, True), (record["id"], right)
        wrong = grader.grade(f"The result is \\boxed{{{answer + 1}}}.", truth)
        assert (wrong.score, wrong.parsed) == (0.0, True), (record["id"], wrong)


def test_written_file_is_one_object_per_line(tmp_path: Path) -> None:
    out = tmp_path / "e.jsonl"
    generate_dataset("easy-arithmetic", 4, 5, out)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4
    assert [json.loads(line)["id"] for line in lines] == [f"easy-5-{i}" for i in range(4)]
