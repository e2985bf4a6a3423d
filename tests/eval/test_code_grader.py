"""The code grader: LiveCodeBench's pass-all rule in the real sandbox, and hostile solutions.

Every solution runs through :class:`~pacore_graph.tools.sandbox.LocalSandbox`
(no mock): each hostile program below must fail its test with the recorded
kind, and the grader must keep grading afterwards.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest

from pacore_graph.eval.code_grader import CodeGrader, code_test_suite
from pacore_graph.eval.code_tests import CODE_TESTS_KEY, CodeTest, CodeTests
from pacore_graph.eval.graders import CodeOrAnswerGrader, auto_grader, grader_from_name
from pacore_graph.tools.sandbox import ExecRequest, ExecResult, LocalSandbox

SUM_TESTS = CodeTests(
    tests=(
        CodeTest("1 2\n", "3\n", "stdin"),
        CodeTest("5 7\n", "12", "stdin", public=False),
        CodeTest("-4 4\n", "0", "stdin", public=False),
    ),
    time_limit_s=1.0,
)
SUM_TRUTH = {CODE_TESTS_KEY: SUM_TESTS.to_json()}
TWO_SUM = CodeTests(
    tests=(
        CodeTest("[2, 7, 11, 15]\n9", "[0, 1]", "functional"),
        CodeTest("[3, 2, 4]\n6", "[1, 2]", "functional", public=False),
    ),
    fn_name="twoSum",
    time_limit_s=1.0,
)
TWO_SUM_TRUTH = {CODE_TESTS_KEY: TWO_SUM.to_json()}

RIGHT_SUM = "a, b = map(int, input().split())\nprint(a + b)"
RIGHT_TWO_SUM = """\
class Solution:
    def twoSum(self, nums: List[int], target: int) -> List[int]:
        seen = {}
        for i, x in enumerate(nums):
            if target - x in seen:
                print("found it")  # printing does not spoil the return value
                return (seen[target - x], i)
            seen[x] = i
"""


def fenced(code: str) -> str:
    draft = "<think>\n```python\nprint('a draft')\n```\n</think>\n"
    return f"{draft}Here it is:\n```python\n{code}\n```"


@pytest.fixture(scope="module")
def grader() -> Iterator[CodeGrader]:
    g = CodeGrader(workers=2)
    yield g
    g.close()


def test_right_solutions_pass_every_test(grader: CodeGrader) -> None:
    grade = grader.grade(fenced(RIGHT_SUM), SUM_TRUTH)
    assert (grade.score, grade.parsed) == (1.0, True)
    assert grade.info == {"tests": 3, "ran": 3, "passed": 3}
    grade = grader.grade(fenced(RIGHT_TWO_SUM), TWO_SUM_TRUTH)
    assert grade.score == 1.0, grade.detail


def test_lcb_prelude_lets_a_solution_skip_its_imports(grader: CodeGrader) -> None:
    # LiveCodeBench runs every solution after `from math import *`, `import sys`, ...
    code = "a, b = map(int, sys.stdin.read().split())\nprint(a + b)"
    grade = grader.grade(fenced(code), SUM_TRUTH)
    assert grade.score == 1.0, grade.detail


def test_one_failing_private_test_fails_the_solution(grader: CodeGrader) -> None:
    code = "a, b = map(int, input().split())\nprint(a + b if a != -4 else 1)"
    grade = grader.grade(fenced(code), SUM_TRUTH)
    assert grade.score == 0.0 and grade.parsed
    assert grade.info is not None
    assert grade.info["passed"] == 2
    assert grade.info["first_failure"]["kind"] == "wrong_answer"
    assert grade.info["first_failure"]["test"] == 2


def test_no_code_is_recorded_as_such(grader: CodeGrader) -> None:
    grade = grader.grade("I would add the two numbers: 3.", SUM_TRUTH)
    assert (grade.score, grade.parsed) == (0.0, False)
    assert grade.info is not None and grade.info["first_failure"]["kind"] == "no_code"


def test_functional_wrong_value_and_missing_method(grader: CodeGrader) -> None:
    wrong = "class Solution:\n    def twoSum(self, nums, target):\n        return [0, 0]"
    grade = grader.grade(fenced(wrong), TWO_SUM_TRUTH)
    assert grade.info is not None and grade.info["first_failure"]["kind"] == "wrong_answer"
    misnamed = "class Solution:\n    def two_sum(self, nums, target):\n        return [0, 1]"
    grade = grader.grade(fenced(misnamed), TWO_SUM_TRUTH)
    assert grade.info is not None and grade.info["first_failure"]["kind"] == "runtime_error"
    unserialisable = "class Solution:\n    def twoSum(self, nums, target):\n        return {0, 1}"
    grade = grader.grade(fenced(unserialisable), TWO_SUM_TRUTH)
    assert grade.score == 0.0
    assert grade.info is not None and grade.info["first_failure"]["kind"] == "runtime_error"


def test_stops_at_the_first_failure_unless_asked_for_the_pass_rate() -> None:
    code = "a, b = map(int, input().split())\nprint(a + b if a != 1 else 0)"
    with CodeGrader(workers=1) as lcb, CodeGrader(workers=1, stop_at_first_failure=False) as rl:
        first = lcb.grade(fenced(code), SUM_TRUTH)
        every = rl.grade(fenced(code), SUM_TRUTH)
    assert first.info is not None and (first.info["ran"], first.info["passed"]) == (1, 0)
    assert every.info is not None and (every.info["ran"], every.info["passed"]) == (3, 2)


def test_partial_credit_scores_the_pass_rate() -> None:
    code = "a, b = map(int, input().split())\nprint(a + b if a != 1 else 0)"
    with CodeGrader(workers=2, partial_credit=True) as rl:
        grade = rl.grade(fenced(code), SUM_TRUTH)
    assert grade.score == pytest.approx(2 / 3)
    assert grade.info is not None and grade.info["ran"] == 3


class PeakCounter:
    """A sandbox wrapper counting executions in flight; each waits until two have overlapped.

    The wait makes "two at once" certain whenever the grader allows it (no
    timing: a condition, released the moment the second arrives); if it never
    comes, the first waiter gives up once and the peak stays 1, which fails the test.
    """

    def __init__(self, inner: LocalSandbox, target: int) -> None:
        self.inner = inner
        self.target = target
        self.active = 0
        self.peak = 0
        self.calls = 0
        self.gave_up = False
        self._cond = threading.Condition()

    def execute(self, request: ExecRequest) -> ExecResult:
        with self._cond:
            self.active += 1
            self.calls += 1
            self.peak = max(self.peak, self.active)
            self._cond.notify_all()
            if not self.gave_up and not self._cond.wait_for(
                lambda: self.peak >= self.target, timeout=60
            ):
                self.gave_up = True
        try:
            return self.inner.execute(request)
        finally:
            with self._cond:
                self.active -= 1

    def shutdown(self) -> None:
        self.inner.shutdown()


def test_grader_workers_bound_the_sandbox_runs_across_answers() -> None:
    counter = PeakCounter(LocalSandbox(), target=2)
    wrong = "a, b = map(int, input().split())\nprint(a - b)"
    answers = [RIGHT_SUM, RIGHT_SUM, wrong, RIGHT_SUM, RIGHT_SUM, wrong]
    try:
        grader = CodeGrader(workers=2, sandbox=cast(LocalSandbox, counter))
        with ThreadPoolExecutor(max_workers=len(answers)) as pool:  # answers graded at once
            grades = list(pool.map(lambda code: grader.grade(fenced(code), SUM_TRUTH), answers))
    finally:
        counter.shutdown()
    assert [g.score for g in grades] == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    assert counter.calls >= 4 * 3 + 2  # every test of the right answers, the first of the wrong
    assert counter.peak == 2 and not counter.gave_up


# --------------------------------------------------------------------------- hostile solutions


def _kind(grader: CodeGrader, code: str, truth: Any = SUM_TRUTH) -> str:
    grade = grader.grade(fenced(code), truth)
    assert grade.score == 0.0, grade.detail
    assert grade.info is not None
    return str(grade.info["first_failure"]["kind"])


def test_infinite_loop_hits_the_time_limit(grader: CodeGrader) -> None:
    assert _kind(grader, "while True:\n    pass") == "time_limit"


def test_fork_bomb_fails_its_test_only(grader: CodeGrader) -> None:
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    assert _kind(grader, bomb) in {"time_limit", "runtime_error"}
    assert grader.grade(fenced(RIGHT_SUM), SUM_TRUTH).score == 1.0  # still grading


def test_memory_hog_hits_the_memory_limit(grader: CodeGrader) -> None:
    assert _kind(grader, "block = bytearray(4 * 1024 ** 3)\nprint(len(block))") == "memory_limit"


def test_endless_output_hits_the_output_cap(grader: CodeGrader) -> None:
    assert _kind(grader, "while True:\n    print('3' * 4096)") == "output_limit"


def test_writing_outside_its_workspace_fails_and_writes_nothing(
    grader: CodeGrader, tmp_path: Path
) -> None:
    tmp_path.chmod(0o777)  # even a directory the sandbox user may write on the host
    target = tmp_path / "escaped.txt"
    code = f"open({str(target)!r}, 'w').write('x')\n{RIGHT_SUM}"
    assert _kind(grader, code) == "runtime_error"
    assert not target.exists()


def test_reading_the_tests_file_fails(grader: CodeGrader, tmp_path: Path) -> None:
    tests_file = tmp_path / "tests.json"
    tests_file.write_text(json.dumps(SUM_TESTS.to_json()))
    tests_file.chmod(0o600)
    code = (
        "import json\n"
        f"tests = json.load(open({str(tests_file)!r}))['tests']\n"
        "line = input()\n"
        "print(next(t['output'] for t in tests if t['input'].strip() == line.strip()))"
    )
    assert _kind(grader, code) == "runtime_error"


def test_network_is_unreachable(grader: CodeGrader) -> None:
    connections: list[object] = []
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.2)
        port = server.getsockname()[1]

        def accept() -> None:
            for _ in range(20):
                try:
                    connections.append(server.accept())
                except OSError:
                    continue

        watcher = threading.Thread(target=accept)
        watcher.start()
        connect = f"socket.create_connection(('127.0.0.1', {port}), timeout=1)"
        code = f"import socket\n{connect}\n{RIGHT_SUM}"
        kind = _kind(grader, code)
        watcher.join()
    assert kind == "runtime_error"
    assert connections == []


def test_reading_etc_shadow_is_a_runtime_error_that_leaks_nothing(grader: CodeGrader) -> None:
    code = f"import sys\nsys.stdout.write(open('/etc/shadow').read())\n{RIGHT_SUM}"
    grade = grader.grade(fenced(code), SUM_TRUTH)
    assert grade.score == 0.0 and grade.info is not None
    failure = grade.info["first_failure"]
    assert (failure["kind"], failure["test"]) == ("runtime_error", 0)
    assert "PermissionError" in failure["detail"] or "FileNotFoundError" in failure["detail"]
    try:  # the test process may read it (as root); the solution's grade must not hold it
        secret = [line for line in Path("/etc/shadow").read_text().splitlines() if line.strip()]
    except OSError:
        secret = []
    shown = json.dumps(grade.info) + grade.detail
    assert "root:" not in shown
    assert not [line for line in secret if line in shown]


def test_killing_its_supervisor_or_exiting_early_only_fails_itself(grader: CodeGrader) -> None:
    kill = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nprint(0)"
    grade = grader.grade(fenced(kill), SUM_TRUTH)
    assert grade.score == 0.0 and grade.info is not None
    failure = grade.info["first_failure"]
    if os.geteuid() == 0:
        # Its parent is the sandbox's init, owned by root; the code runs as nobody in a
        # user namespace of its own: the kill is refused and the solution dies of it.
        assert (failure["kind"], failure["test"]) == ("runtime_error", 0)
        assert "Operation not permitted" in failure["detail"], failure
    else:
        # Started by an ordinary user, init shares the code's uid; the kernel drops a
        # SIGKILL sent to a PID namespace's init from inside it, so the code prints 0.
        assert (failure["kind"], failure["test"]) == ("wrong_answer", 0)
    assert grader.grade(fenced(RIGHT_SUM), SUM_TRUTH).score == 1.0  # the supervisor lives on
    assert _kind(grader, "import sys\nsys.exit(0)\nprint(3)") == "wrong_answer"
    assert grader.grade(fenced(RIGHT_SUM), SUM_TRUTH).score == 1.0


def test_forged_result_line_cannot_pass_a_functional_test(grader: CodeGrader) -> None:
    from pacore_graph.eval.code_programs import RESULT_MARKER

    forged = (
        "import sys\nclass Solution:\n    def twoSum(self, nums, target):\n"
        f"        sys.__stdout__.write({RESULT_MARKER!r} + '[9, 9]\\n')\n"
        "        return [0, 0]"
    )
    assert _kind(grader, forged, TWO_SUM_TRUTH) == "wrong_answer"


# --------------------------------------------------------------------------- inputs and registry


def test_lcb_columns_read_directly() -> None:
    truth = {
        "public_test_cases": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]),
        "private_test_cases": [{"input": "5 7\n", "output": "12\n", "testtype": "stdin"}],
        "metadata": "{}",
    }
    suite = code_test_suite(truth)
    assert [t.public for t in suite.tests] == [True, False]


def test_a_record_without_tests_is_a_bad_test_grade(grader: CodeGrader) -> None:
    grade = grader.grade(fenced(RIGHT_SUM), {"answer": "3"})
    assert (grade.score, grade.parsed) == (0.0, False)
    assert grade.info is not None and grade.info["first_failure"]["kind"] == "bad_test"


def test_a_sandbox_that_cannot_run_is_a_grade_not_a_crash() -> None:
    sandbox = LocalSandbox()
    sandbox.shutdown()
    grade = CodeGrader(sandbox=sandbox).grade(fenced(RIGHT_SUM), SUM_TRUTH)
    assert grade.score == 0.0
    assert grade.info is not None and grade.info["first_failure"]["kind"] == "sandbox_error"


def test_code_is_a_name_and_the_grader_for_code_records() -> None:
    assert isinstance(grader_from_name("code"), CodeGrader)
    auto = auto_grader("code")
    assert isinstance(auto, CodeOrAnswerGrader) and auto is auto_grader("Code")  # one sandbox
    assert auto.grade(fenced(RIGHT_SUM), SUM_TRUTH).score == 1.0  # tests: run
    assert auto.grade(fenced(RIGHT_SUM), SUM_TRUTH).info is not None
    # A code record with only an answer is graded by its answer, as before the code grader.
    assert auto.grade("It prints \\boxed{42}.", {"answer": "42"}).score == 1.0
    assert auto.grade("It prints \\boxed{41}.", {"answer": "42"}).score == 0.0


def test_workers_must_be_positive() -> None:
    with pytest.raises(ValueError, match="workers"):
        CodeGrader(workers=0)


def test_rl_rewards_run_code_for_category_code() -> None:
    from pacore_graph.rl.rewards import PaCoReReward

    reward = PaCoReReward()
    right, wrong = fenced(RIGHT_SUM), fenced("print(0)")
    truths = [json.dumps(SUM_TRUTH)] * 2
    assert reward(completions=[right, wrong], ground_truth=truths, category=["code"] * 2) == [
        1.0,
        0.0,
    ]
    with CodeGrader(partial_credit=True) as rate:
        code = "a, b = map(int, input().split())\nprint(a + b if a != 1 else 0)"
        scores = PaCoReReward(grader=rate)(completions=[fenced(code)], ground_truth=truths[:1])
    assert scores == [pytest.approx(2 / 3)]
