"""Graders: tricky equivalences, never raising, threads and asyncio, the name registry."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pacore_graph.eval import (
    CallableGrader,
    ChoiceGrader,
    ExactGrader,
    Grade,
    Grader,
    MathGrader,
    NumericGrader,
    auto_grader,
    grader_from_name,
    ground_truth_answer,
)
from pacore_graph.eval.graders import GradingTimeoutError
from pacore_graph.eval.math_grader import _call_with_deadline

REPO = Path(__file__).resolve().parents[2]
BIG = "123456789012345678901234567"
BIG_PLUS_ONE = "123456789012345678901234568"


@pytest.fixture(scope="module")
def math_grader() -> MathGrader:
    return MathGrader()


def score(grader: Grader, response: str, truth: Any) -> float:
    return grader.grade(response, truth).score


# --------------------------------------------------------------------------- math


@pytest.mark.parametrize(
    ("response", "truth", "expected"),
    [
        (r"so \boxed{\frac{1}{2}}", "0.5", 1.0),
        (r"\boxed{0.5}", r"\frac{1}{2}", 1.0),
        (r"\boxed{1/2}", r"\frac{1}{2}", 1.0),
        (r"\boxed{\dfrac{1}{2}}", "0.5", 1.0),
        (r"\boxed{\tfrac{2}{4}}", "1/2", 1.0),
        (r"\boxed{\dfrac{1}{3}}", "0.5", 0.0),
        (r"\boxed{\frac{2}{1}}", r"\frac{1}{2}", 0.0),
    ],
)
def test_math_fractions(
    math_grader: MathGrader, response: str, truth: str, expected: float
) -> None:
    assert score(math_grader, response, truth) == expected


@pytest.mark.parametrize(
    ("response", "truth", "expected"),
    [
        (r"\boxed{32}", {"answer": "32 cm²"}, 1.0),
        (r"\boxed{32 \text{ cm}^2}", {"answer": "32 cm²"}, 1.0),
        (r"\boxed{32 cm^2}", {"answer": "32 cm²"}, 1.0),
        (r"\boxed{32 cm²}", "32", 1.0),
        (r"\boxed{33}", {"answer": "32 cm²"}, 0.0),
        (r"\boxed{20}", "20 meters", 1.0),
        ("The ball rises 20 meters.", "20", 1.0),
        (r"\boxed{20 \text{ meters}}", "20", 1.0),
        (r"\boxed{21 \text{ meters}}", "20 meters", 0.0),
        # One bare letter after a number is a variable, not a unit: 3x is not 3.
        (r"\boxed{3 x}", "3", 0.0),
    ],
)
def test_math_units(math_grader: MathGrader, response: str, truth: Any, expected: float) -> None:
    assert score(math_grader, response, truth) == expected


@pytest.mark.parametrize(
    ("response", "truth", "expected"),
    [
        (r"\boxed{-7}", "-7", 1.0),
        (r"\boxed{-7}", -7, 1.0),
        ("The answer is -7.", "-7", 1.0),
        (r"\boxed{−7}", "-7", 1.0),  # Unicode minus sign
        (r"\boxed{-7}", "7", 0.0),
        (r"\boxed{7}", "-7", 0.0),
        (r"\boxed{7}", -7, 0.0),
    ],
)
def test_math_negative_numbers(
    math_grader: MathGrader, response: str, truth: Any, expected: float
) -> None:
    assert score(math_grader, response, truth) == expected


def test_math_the_last_boxed_answer_counts(math_grader: MathGrader) -> None:
    assert score(math_grader, r"First \boxed{1}, no wait: \boxed{5050}", "5050") == 1.0
    assert score(math_grader, r"First \boxed{5050}, no wait: \boxed{1}", "5050") == 0.0
    grade = math_grader.grade(r"\boxed{3} then \boxed{\frac{1}{2}}", "0.5")
    assert (grade.score, grade.extracted) == (1.0, r"\frac{1}{2}")


def test_math_boxed_answer_inside_think_does_not_count(math_grader: MathGrader) -> None:
    thought_right = r"<think>maybe \boxed{5050}</think>The answer is \boxed{5049}."
    assert score(math_grader, thought_right, "5050") == 0.0
    concluded_right = r"<think>maybe \boxed{5049}</think>The answer is \boxed{5050}."
    assert score(math_grader, concluded_right, "5050") == 1.0
    # An answer only in the reasoning is not an answer at all.
    grade = math_grader.grade(r"<think>\boxed{5050}</think>I am not sure.", "5050")
    assert (grade.score, grade.parsed) == (0.0, False)


def test_math_thousands_separators(math_grader: MathGrader) -> None:
    assert score(math_grader, r"\boxed{1,234,567}", 1234567) == 1.0
    assert score(math_grader, r"\boxed{1,234,568}", "1234567") == 0.0
    assert score(math_grader, r"\boxed{1234567}", "1,234,567") == 1.0


def test_math_big_integers_compare_exactly(math_grader: MathGrader) -> None:
    a, b = 9_876_543_210_123, 1_234_567_890_987  # 13-digit operands, 26-digit product
    product = a * b
    assert score(math_grader, rf"\boxed{{{product}}}", {"answer": str(product)}) == 1.0
    assert score(math_grader, rf"\boxed{{{product + 1}}}", {"answer": str(product)}) == 0.0
    assert score(math_grader, rf"\boxed{{{product}}}", product) == 1.0
    # A grader going through floats would call these equal.
    assert float(BIG) == float(BIG_PLUS_ONE)
    assert score(math_grader, rf"\boxed{{{BIG}}}", BIG_PLUS_ONE) == 0.0
    assert score(math_grader, rf"\boxed{{{BIG}}}", int(BIG)) == 1.0


def test_math_latex_equivalence_and_text_answers(math_grader: MathGrader) -> None:
    assert score(math_grader, r"\boxed{2^{10}}", "1024") == 1.0
    assert score(math_grader, r"\boxed{1024}", "2^{10}") == 1.0
    assert score(math_grader, r"\boxed{x^2+5}", "5 + x^2") == 1.0
    assert score(math_grader, r"\boxed{x^2+6}", "5 + x^2") == 0.0
    assert score(math_grader, r"\boxed{\frac{\sqrt{3}}{2}}", r"\frac{\sqrt3}{2}") == 1.0
    # Answers that are not math are compared as normalised text.
    assert score(math_grader, r"\boxed{\text{Box B}}", "Box B") == 1.0
    assert score(math_grader, r"\boxed{box b.}", "Box B") == 1.0
    assert score(math_grader, r"\boxed{Box C}", "Box B") == 0.0
    assert score(math_grader, r"\boxed{B}", "Box B") == 0.0


def test_math_without_ground_truth_scores_zero_but_reports_the_answer(
    math_grader: MathGrader,
) -> None:
    grade = math_grader.grade(r"\boxed{5}", None)
    assert (grade.score, grade.parsed, grade.extracted, grade.expected) == (0.0, True, "5", None)
    assert "no ground-truth" in grade.detail
    assert math_grader.grade(r"\boxed{5}", {"no_answer_key": 5}).expected is None


def test_math_huge_values_are_compared_as_text_not_evaluated() -> None:
    """Building 10^(10^10) is one C call holding the GIL: no timeout could stop it.

    Run in a subprocess so a broken size guard fails the test instead of
    hanging the test run.
    """
    code = textwrap.dedent(
        r"""
        from pacore_graph.eval import MathGrader
        g = MathGrader()
        cases = [
            (r"\boxed{10^{10^{10}}}", "5", 0.0),
            (r"\boxed{10^{10^{10}}}", r"10^{10^{10}}", 1.0),
            (r"\boxed{(10^{100})^{100000}}", "5", 0.0),
            (r"\boxed{2**10**10}", "5", 0.0),
            (r"\boxed{1000000!}", "5", 0.0),
            ("so the answer is 9^{9^{9}}", "5", 0.0),
        ]
        for response, truth, want in cases:
            grade = g.grade(response, truth)
            assert grade.score == want and grade.parsed, (response, grade)
            assert "compared as text" in grade.detail, grade
        print("ok")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_math_grade_over_its_deadline_scores_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    # The verification spins until released; it is never released, so only the
    # deadline can end the grade. Without the deadline the loop runs out its
    # 30 s hang guard and the grade comes back as a pass, which fails below.
    finished = threading.Event()

    def slow_verify(self: MathGrader, candidate: str, boxed: bool, expected: str) -> Grade:
        for _ in range(3000):  # hang guard: 3000 x 10 ms
            time.sleep(0.01)
        finished.set()
        return Grade(1.0, True)

    monkeypatch.setattr(MathGrader, "_verify", slow_verify)
    grade = MathGrader(timeout_s=0.2).grade(r"\boxed{1}", "1")
    assert not finished.is_set()  # the grade did not wait for the verification
    assert (grade.score, grade.parsed) == (0.0, False)
    assert "longer than 0.2s" in grade.detail


def test_deadline_stops_a_runaway_python_loop() -> None:
    # The loop spins until ``release`` is set, which only the 30 s hang guard
    # does: if the deadline did not fire, ``spin`` would return normally and
    # ``pytest.raises`` would fail.
    spinning: list[threading.Thread] = []
    release = threading.Event()
    completed = threading.Event()

    def spin() -> None:
        spinning.append(threading.current_thread())
        while not release.is_set():
            pass
        completed.set()

    guard = threading.Timer(30, release.set)
    guard.start()
    try:
        with pytest.raises(GradingTimeoutError, match=r"longer than 0\.2s"):
            _call_with_deadline(spin, 0.2)
        spinning[0].join(5)
        assert not spinning[0].is_alive()  # the abandoned thread really stopped
        assert not completed.is_set()  # ... by the deadline, not by running out
    finally:
        guard.cancel()


# --------------------------------------------------------------------------- threads and asyncio


def test_math_grading_works_from_a_worker_thread() -> None:
    """math-verify's own signal-based timeout raises off the main thread; ours must not."""
    results: list[Grade] = []

    def work() -> None:
        for grader in (MathGrader(), MathGrader(timeout_s=None)):
            results.append(grader.grade(r"\boxed{\frac{1}{2}}", "0.5"))
            results.append(grader.grade(r"\boxed{-7}", "7"))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(60)
    assert [(g.score, g.parsed) for g in results] == [(1.0, True), (0.0, True)] * 2
    assert all(g.detail == "" for g in results), results


def test_math_grading_works_inside_asyncio_run(math_grader: MathGrader) -> None:
    async def main() -> tuple[Grade, Grade, list[Grade]]:
        direct = math_grader.grade(r"\boxed{3}", 3)
        inline = await asyncio.to_thread(MathGrader(timeout_s=None).grade, r"\boxed{3}", 3)
        many = await asyncio.gather(
            *(
                asyncio.to_thread(math_grader.grade, rf"\boxed{{{i * 7919}}}", i * 7919)
                for i in range(40)
            )
        )
        return direct, inline, list(many)

    direct, inline, many = asyncio.run(main())
    assert direct.score == inline.score == 1.0
    assert [g.score for g in many] == [1.0] * 40


@pytest.mark.skipif(not hasattr(signal, "SIGALRM"), reason="needs POSIX signals")
def test_math_grading_leaves_the_process_alarm_alone() -> None:
    """math-verify's timeout would replace SIGALRM's handler and cancel a pending alarm."""
    fired: list[int] = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    try:
        signal.alarm(100)
        grade = MathGrader(timeout_s=None).grade(r"\boxed{\frac{1}{2}}", "0.5")
        remaining = signal.alarm(0)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert grade.score == 1.0
    assert remaining > 90  # still pending: nobody cancelled it
    assert fired == []


def test_math_verify_timeout_warning_is_filtered(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """math-verify warns "you must provide the logic for timeout" once: we do, so say nothing."""
    import math_verify.grader
    import math_verify.parser

    monkeypatch.setattr(math_verify.parser, "TIMEOUT_WARNING_SHOWN", False)
    monkeypatch.setattr(math_verify.grader, "TIMEOUT_WARNING_SHOWN", False)
    with caplog.at_level(logging.DEBUG):
        assert MathGrader().grade(r"\boxed{\frac{1}{2}}", "0.5").score == 1.0
    assert "Timeout is disabled" not in caplog.text
    assert math_verify.parser.TIMEOUT_WARNING_SHOWN  # it did try to warn


# --------------------------------------------------------------------------- never raise

ALL_GRADERS: list[Grader] = [MathGrader(), ExactGrader(), NumericGrader(), ChoiceGrader()]


@pytest.mark.parametrize("grader", ALL_GRADERS, ids=lambda g: g.name)
@pytest.mark.parametrize("response", ["", "   \n  ", "I don't know.", r"\boxed{}", "<think>"])
def test_unparseable_responses_score_zero_unparsed(grader: Grader, response: str) -> None:
    truth = "B" if grader.name == "choice" else "42"
    grade = grader.grade(response, {"answer": truth})
    if grader.name == "exact" and response.strip() not in ("", r"\boxed{}"):
        # The exact grader reads any last line as the answer: parsed, but wrong.
        assert (grade.score, grade.parsed) == (0.0, True)
    else:
        assert (grade.score, grade.parsed, grade.extracted) == (0.0, False, None)
    assert grade.expected == truth


@pytest.mark.parametrize("grader", ALL_GRADERS, ids=lambda g: g.name)
@pytest.mark.parametrize("response", [None, 42, b"\\boxed{42}", ["42"]])
def test_non_string_responses_do_not_raise(grader: Grader, response: Any) -> None:
    grade = grader.grade(response, "42")
    assert (grade.score, grade.parsed) == (0.0, False)
    assert "must be a string" in grade.detail


def test_bad_ground_truths_do_not_raise() -> None:
    assert "not a choice letter" in ChoiceGrader().grade(r"\boxed{B}", "forty-two").detail
    assert "contains no number" in NumericGrader().grade(r"\boxed{4}", "four").detail
    for grader in ALL_GRADERS:
        assert grader.grade(r"\boxed{4}", object()).score == 0.0


def test_grade_validates_its_score() -> None:
    assert Grade(1, True).score == 1.0 and isinstance(Grade(1, True).score, float)
    for bad in (-0.1, 1.5, float("nan"), "1"):
        with pytest.raises(ValueError, match=r"in \[0, 1\]"):
            Grade(bad, True)  # type: ignore[arg-type]


def test_builtins_satisfy_the_protocol() -> None:
    for grader in [*ALL_GRADERS, CallableGrader(lambda r, g: True)]:
        assert isinstance(grader, Grader)


# --------------------------------------------------------------------------- exact, numeric, choice


@pytest.mark.parametrize(
    ("response", "truth", "expected"),
    [
        ("Some work.\nThe answer is:\n  Box   B. ", "box b", 1.0),
        (r"\boxed{\text{Box B}}", "Box B", 1.0),
        ("Answer: Box B", "Box B", 1.0),
        (r"Not \boxed{Box A} but \boxed{Box B}", "Box B", 1.0),
        (r"<think>\boxed{Box B}</think>Box C", "Box B", 0.0),
        ("Box C", "Box B", 0.0),
        ("Box B is likely", "Box B", 0.0),
    ],
)
def test_exact(response: str, truth: str, expected: float) -> None:
    assert score(ExactGrader(), response, truth) == expected


@pytest.mark.parametrize(
    ("response", "truth", "expected"),
    [
        ("It goes up 20 meters", "20", 1.0),
        ("It goes up 20 meters", "20 meters", 1.0),
        ("area = 32 cm^2", "32 cm²", 1.0),
        ("a = 9.8 m/s^2", "9.8", 1.0),
        (r"\boxed{1,234}", "1234", 1.0),
        ("about 1,234,567.5 units", "1234567.5", 1.0),
        (r"\boxed{-7}", "-7", 1.0),
        (r"\boxed{-7}", "7", 0.0),
        ("so x = −7", "-7", 1.0),
        ("pages 3-4", "4", 1.0),
        ("so x = 3/4", "0.75", 1.0),
        (r"\boxed{\frac{3}{4}}", "0.75", 1.0),
        (r"\boxed{-\dfrac{3}{4}}", "-3/4", 1.0),
        ("0.3333333", "1/3", 1.0),  # within 1e-6
        ("0.3333", "1/3", 0.0),
        ("1.5e3", "1500", 1.0),
        (f"it is {BIG}", BIG_PLUS_ONE, 0.0),  # integers: exact, no tolerance
        (f"it is {BIG}", BIG, 1.0),
        (r"First 5050, then \boxed{5049}", "5050", 0.0),
        (r"<think>5050</think>Final: 5049", "5050", 0.0),
    ],
)
def test_numeric(response: str, truth: str, expected: float) -> None:
    assert score(NumericGrader(), response, truth) == expected


def test_numeric_tolerance_is_configurable() -> None:
    assert score(NumericGrader(rel_tol=1e-3), "0.3333", "1/3") == 1.0
    with pytest.raises(ValueError, match="rel_tol"):
        NumericGrader(rel_tol=-1)


@pytest.mark.parametrize(
    ("response", "truth", "expected"),
    [
        (r"\boxed{B}", "B", 1.0),
        (r"\boxed{(B)}", "b", 1.0),
        (r"\boxed{\text{B}}", "(B)", 1.0),
        (r"\boxed{B) 42}", "B", 1.0),
        ("The answer is (C).", "C", 1.0),
        ("the answer is (c)", "C", 1.0),
        ("Answer: D", "D", 1.0),
        ("I think A.\nFinal answer: **J**", "J", 1.0),
        ("Reasoning...\n\n(E)", "E", 1.0),
        ("Reasoning...\nE", "E", 1.0),
        (r"\boxed{B}", "C", 0.0),
        (r"\boxed{A} then \boxed{C}", "A", 0.0),
        (r"<think>\boxed{A}</think>The answer is B.", "A", 0.0),
        ("the answer is a prime", "A", 0.0),  # lower-case "a" is a word here
        ("K", "K", 0.0),  # outside A-J
    ],
)
def test_choice(response: str, truth: str, expected: float) -> None:
    assert score(ChoiceGrader(), response, truth) == expected


# --------------------------------------------------------------------------- callables


def test_callable_grader_accepts_bool_float_and_grade() -> None:
    as_bool = CallableGrader(lambda response, truth: response.strip() == truth["answer"])
    assert as_bool.grade("42", {"answer": "42"}) == Grade(1.0, True, None, "42")
    assert as_bool.grade("41", {"answer": "42"}).score == 0.0

    as_float = CallableGrader(lambda response, truth: 0.25, name="quarter")
    assert (as_float.name, as_float.grade("x", "y").score) == ("quarter", 0.25)

    custom = Grade(0.5, True, "x", "y", "partial credit")
    assert CallableGrader(lambda response, truth: custom).grade("x", "y") is custom


def test_callable_grader_failures_score_zero() -> None:
    def boom(response: str, truth: Any) -> float:
        raise RuntimeError("test harness exploded")

    grade = CallableGrader(boom).grade("x", {"answer": "1"})
    assert (grade.score, grade.parsed, grade.expected) == (0.0, False, "1")
    assert "RuntimeError: test harness exploded" in grade.detail
    assert CallableGrader(boom).name.endswith("boom")

    too_big = CallableGrader(lambda response, truth: 1.5).grade("x", "1")
    assert too_big.score == 0.0 and "[0, 1]" in too_big.detail
    wrong_type = CallableGrader(lambda response, truth: "yes").grade("x", "1")  # type: ignore[arg-type,return-value]
    assert wrong_type.score == 0.0 and "must return a bool" in wrong_type.detail
    with pytest.raises(TypeError, match="needs a callable"):
        CallableGrader(42)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- registry


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = "pacore_test_user_grading"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            from pacore_graph.eval import ExactGrader

            def contains(response, ground_truth):
                return ground_truth["answer"] in response

            class Scorers:
                @staticmethod
                def half(response, ground_truth):
                    return 0.5

            READY = ExactGrader(name="my-exact")
            NOT_CALLABLE = 42
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def test_grader_from_name_builtins() -> None:
    assert isinstance(grader_from_name("math"), MathGrader)
    assert isinstance(grader_from_name(" exact "), ExactGrader)
    assert isinstance(grader_from_name("numeric"), NumericGrader)
    assert isinstance(grader_from_name("choice"), ChoiceGrader)


def test_grader_from_name_loads_user_callables(user_module: str) -> None:
    grader = grader_from_name(f"{user_module}:contains")
    assert isinstance(grader, CallableGrader)
    assert grader.name == f"{user_module}:contains"
    assert grader.grade("it is 42", {"answer": "42"}).score == 1.0
    assert grader_from_name(f"{user_module}:Scorers.half").grade("x", "y").score == 0.5
    ready = grader_from_name(f"{user_module}:READY")
    assert isinstance(ready, ExactGrader) and ready.name == "my-exact"


def test_grader_from_name_errors(user_module: str) -> None:
    with pytest.raises(ValueError, match="unknown grader 'bogus'; choose math, exact"):
        grader_from_name("bogus")
    with pytest.raises(ValueError, match="expected module:function"):
        grader_from_name(f"{user_module}:")
    with pytest.raises(ImportError, match="cannot import module 'no_such_module_xyz'"):
        grader_from_name("no_such_module_xyz:score")
    with pytest.raises(ValueError, match="has no attribute 'missing'"):
        grader_from_name(f"{user_module}:missing")
    with pytest.raises(TypeError, match="is a int, not a function"):
        grader_from_name(f"{user_module}:NOT_CALLABLE")


def test_auto_grader_defaults_to_math() -> None:
    assert isinstance(auto_grader(None), MathGrader)
    assert isinstance(auto_grader("math"), MathGrader)
    assert isinstance(auto_grader("physics"), MathGrader)
    assert isinstance(auto_grader("Multiple_Choice"), ChoiceGrader)
    assert isinstance(auto_grader("mcq"), ChoiceGrader)
    assert isinstance(auto_grader("exact"), ExactGrader)
    assert isinstance(auto_grader("numeric"), NumericGrader)


def test_ground_truth_answer_normalises_formats() -> None:
    assert ground_truth_answer({"answer": "32 cm²"}) == "32 cm²"
    assert ground_truth_answer({"answer": 5050}) == "5050"
    assert ground_truth_answer("  Box B \n") == "Box B"
    assert ground_truth_answer(int(BIG)) == BIG
    assert ground_truth_answer(0.5) == "0.5"
    assert ground_truth_answer(1e-7) == "0.0000001"  # never "1e-07"
    assert ground_truth_answer(20.0) == "20"
    assert ground_truth_answer(-7) == "-7"
    for missing in (None, "", "   ", {}, {"solution": "x"}, {"answer": None}, [1, 2]):
        assert ground_truth_answer(missing) is None
