"""code_programs: the scripts the code grader runs, checked by running them (plain python here)."""

from __future__ import annotations

import json
import subprocess
import sys

from pacore_graph.eval.code_programs import (
    LCB_IMPORT_PRELUDE,
    RESULT_MARKER,
    functional_program,
    parse_functional_output,
    stdin_program,
)


def run(program: str, stdin: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", program],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_stdin_program_runs_after_the_prelude_as_main() -> None:
    program = stdin_program('if __name__ == "__main__":\n    print(gcd(12, 18), sqrt(16))')
    assert program.startswith(LCB_IMPORT_PRELUDE)
    assert run(program, "").stdout == "6 4.0\n"


def test_functional_driver_calls_the_solution_method_with_json_arguments() -> None:
    code = (
        "class Solution:\n    def add(self, a: List[int], b):\n"
        "        print('noise')\n        return (sum(a), b)"
    )
    done = run(functional_program(code, "add"), json.dumps([[1, 2], "x"]))
    assert done.returncode == 0, done.stderr
    assert parse_functional_output(done.stdout) == (True, [3, "x"])
    assert "noise" not in done.stdout


def test_a_module_level_function_is_called_when_there_is_no_solution_class() -> None:
    done = run(functional_program("def twice(x):\n    return 2 * x", "twice"), "[21]")
    assert parse_functional_output(done.stdout) == (True, 42)


def test_the_solution_cannot_break_out_of_its_string() -> None:
    code = 'x = """\n'  # an unterminated string would swallow a pasted driver
    done = run(functional_program(code, "f"), "[]")
    assert done.returncode != 0
    assert "SyntaxError" in done.stderr
    assert parse_functional_output(done.stdout)[0] is False


def test_result_lines_read_strictly() -> None:
    assert parse_functional_output("no marker") == (False, "the program printed no result")
    assert parse_functional_output(RESULT_MARKER + "{oops")[0] is False
    ok, why = parse_functional_output(RESULT_MARKER + '{"__unserialisable__": "{1, 2}"}')
    assert not ok and "{1, 2}" in why
    last = f"{RESULT_MARKER}1\n{RESULT_MARKER}2\n"
    assert parse_functional_output(last) == (True, 2)
