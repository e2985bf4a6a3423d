"""The sandbox's own errors: one base, terminal versus recoverable, importable on their own.

They stay on ``RuntimeError`` rather than ``PaCoReError`` because the sandbox
package is copied and imported by another user's interpreter that cannot see
``pacore_graph`` (``tests/test_pacore_graph_errors.py`` lists them as exemptions); the
last test imports the module exactly that way.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import pacore_graph.tools.sandbox.errors as errors_module
from pacore_graph.errors import PaCoReError
from pacore_graph.tools.sandbox import (
    SandboxError,
    SandboxExecutionError,
    SandboxUnavailableError,
)


@pytest.mark.parametrize("error", [SandboxUnavailableError, SandboxExecutionError])
def test_both_kinds_are_sandbox_errors_and_runtime_errors(error: type[Exception]) -> None:
    assert issubclass(error, SandboxError) and issubclass(error, RuntimeError)
    assert not issubclass(error, PaCoReError)  # see the module docstring


def test_terminal_and_recoverable_are_told_apart() -> None:
    """A caller stops the run on the one and reports the other to the model."""
    assert not issubclass(SandboxUnavailableError, SandboxExecutionError)
    assert not issubclass(SandboxExecutionError, SandboxUnavailableError)
    try:
        raise SandboxExecutionError("workspace /nope is not a directory")
    except SandboxUnavailableError:
        pytest.fail("a recoverable error was caught as terminal")
    except SandboxError as caught:
        assert str(caught) == "workspace /nope is not a directory"


def test_the_module_imports_with_the_standard_library_alone() -> None:
    """Loaded by file path in an isolated interpreter that cannot import pacore_graph."""
    path = errors_module.__file__
    code = (
        "import importlib.util, sys\n"
        "sys.modules['pacore_graph'] = None  # importing it would fail\n"
        f"spec = importlib.util.spec_from_file_location('sandbox_errors', {path!r})\n"
        "module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "print(sorted(module.__all__))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(sorted(errors_module.__all__))
