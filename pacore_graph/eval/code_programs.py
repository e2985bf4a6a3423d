"""The programs the code grader runs in the sandbox: a solution as a script or as a call.

LiveCodeBench runs every solution inside its own process with ``exec``
(``lcb_runner/evaluation/testing_util.py``): stdin solutions are wrapped into
a function whose ``sys.stdin``/``input`` are patched, functional solutions
are compiled once and their method called per test. Both get the same
``import_string`` prelude first (``from math import *``, ``import sys``,
``sys.setrecursionlimit(50000)``, ...), so a solution that forgot
``import sys`` still runs; we prepend the same prelude so the same solutions
pass.

Where we differ, and why: each test runs as its own sandboxed process (a
fresh interpreter, real stdin), not as a call in the grader's process. A
solution can then neither see the expected outputs (they never enter the
sandbox: the parent compares) nor carry state from one test to the next,
and a crash, a fork bomb or a ``sys.exit`` ends its test only.

A functional test's driver reads the call's arguments as a JSON array on
stdin (the parent parses the dataset's newline-separated JSON arguments, so
a malformed test is the dataset's error, not the solution's), calls the
method (on ``Solution()`` when the solution defines that class, as
LeetCode-style starter code does, else the module-level function), and
writes the JSON of the returned value after :data:`RESULT_MARKER` on the
last line. Whatever the method prints itself is captured and dropped.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "LCB_IMPORT_PRELUDE",
    "RESULT_MARKER",
    "functional_program",
    "parse_functional_output",
    "stdin_program",
]

LCB_IMPORT_PRELUDE = (
    "from string import *\nfrom re import *\nfrom datetime import *\nfrom collections import *\n"
    "from heapq import *\nfrom bisect import *\nfrom copy import *\nfrom math import *\n"
    "from random import *\nfrom statistics import *\nfrom itertools import *\n"
    "from functools import *\nfrom operator import *\nfrom io import *\nfrom sys import *\n"
    "from json import *\nfrom builtins import *\nfrom typing import *\nimport string\nimport re\n"
    "import datetime\nimport collections\nimport heapq\nimport bisect\nimport copy\nimport math\n"
    "import random\nimport statistics\nimport itertools\nimport functools\nimport operator\n"
    "import io\nimport sys\nimport json\nsys.setrecursionlimit(50000)\n"
)
"""LiveCodeBench's ``import_string``, the prelude every solution runs after."""

RESULT_MARKER = "\x1e@@pacore-code-result@@"
"""Prefix of the driver's result line (starts with an ASCII record separator)."""


def stdin_program(code: str) -> str:
    """A stdin/stdout solution as the script the sandbox runs: the prelude, then the code.

    The code runs as ``__main__``, so an ``if __name__ == "__main__":`` block
    runs (LiveCodeBench unwraps that block for the same effect).
    """
    return LCB_IMPORT_PRELUDE + "\n" + code + "\n"


def functional_program(code: str, fn_name: str) -> str:
    """A driver that runs ``code`` as a module and calls ``fn_name`` with the stdin JSON array.

    The solution runs through ``exec`` from a string literal, so nothing it
    contains (an unterminated string, a stray dedent) can reach into the
    driver's own code.
    """
    return f"""\
import contextlib as _pc_contextlib
import io as _pc_io
import json as _pc_json
import sys as _pc_sys

_pc_args = _pc_json.loads(_pc_sys.stdin.read())
_pc_namespace = {{"__name__": "__solution__"}}
exec(compile({LCB_IMPORT_PRELUDE!r}, "<prelude>", "exec"), _pc_namespace)
exec(compile({code!r}, "<solution>", "exec"), _pc_namespace)
_pc_cls = _pc_namespace.get("Solution")
_pc_target = _pc_cls() if isinstance(_pc_cls, type) else None
_pc_fn = getattr(_pc_target, {fn_name!r}, None) if _pc_target is not None else None
if _pc_fn is None:
    _pc_fn = _pc_namespace.get({fn_name!r})
if not callable(_pc_fn):
    raise NameError("the solution defines no method or function named " + {fn_name!r})
with _pc_contextlib.redirect_stdout(_pc_io.StringIO()):
    _pc_value = _pc_fn(*_pc_args)
if isinstance(_pc_value, tuple):
    _pc_value = list(_pc_value)
try:
    _pc_text = _pc_json.dumps(_pc_value)
except (TypeError, ValueError) as _pc_exc:
    _pc_text = _pc_json.dumps({{"__unserialisable__": repr(_pc_value)[:200]}})
_pc_sys.stdout.write("\\n" + {RESULT_MARKER!r} + _pc_text + "\\n")
_pc_sys.stdout.flush()
"""


def parse_functional_output(stdout: str) -> tuple[bool, Any]:
    """``(True, value)`` from the driver's last result line, ``(False, reason)`` without one."""
    at = stdout.rfind(RESULT_MARKER)
    if at < 0:
        return False, "the program printed no result"
    text = stdout[at + len(RESULT_MARKER) :].split("\n", 1)[0]
    try:
        value = json.loads(text)
    except ValueError:
        return False, "the result line is not JSON"
    if isinstance(value, dict) and set(value) == {"__unserialisable__"}:
        return False, f"returned a value JSON cannot hold: {value['__unserialisable__']}"
    return True, value
