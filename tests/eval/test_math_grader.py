"""eval/math_grader: tricky equivalences, deadlines, and grading from threads and asyncio."""

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
from graders_support import BIG, BIG_PLUS_ONE, score

from pacore_graph.eval import (
    Grade,
    MathGrader,
)
from pacore_graph.eval.graders import GradingTimeoutError
from pacore_graph.eval.math_grader import _call_with_deadline

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def math_grader() -> MathGrader:
    return MathGrader()


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
