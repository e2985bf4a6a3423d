"""The LangChain code tools: invoked the way an agent invokes them, over the real sandbox."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.tools import BaseTool
from sandbox_support import started_sandbox

from pacore_graph.tools.code_executor import (
    WorkspacePathError,
    make_code_tools,
    read_workspace_file,
    write_workspace_file,
)
from pacore_graph.tools.sandbox import (
    MIB,
    BaseCodeExecutor,
    ExecRequest,
    ExecResult,
    LocalSandbox,
    SandboxExecutionError,
    SandboxLimits,
    SandboxUnavailableError,
)

LIMITS = SandboxLimits(
    wall_time_s=1.0, cpu_time_s=5, memory_bytes=256 * MIB, max_processes=16, max_file_bytes=MIB
)


@pytest.fixture(scope="module")
def sandbox() -> Iterator[LocalSandbox]:
    with started_sandbox(LIMITS) as sb:
        yield sb


def by_name(tools: list[BaseTool]) -> dict[str, BaseTool]:
    return {t.name: t for t in tools}


def test_tool_set_depends_on_the_workspace(sandbox: LocalSandbox, tmp_path: Path) -> None:
    assert sorted(by_name(make_code_tools(sandbox))) == ["run_python", "run_shell"]
    tools = by_name(make_code_tools(sandbox, workdir=tmp_path))
    assert sorted(tools) == ["read_file", "run_python", "run_shell", "write_file"]
    assert sorted(tools["run_python"].args) == ["code", "stdin"]
    assert sorted(tools["write_file"].args) == ["content", "path"]
    assert "no network" in tools["run_shell"].description
    with pytest.raises(ValueError):
        make_code_tools(sandbox, workdir=tmp_path / "missing")


def test_run_python_and_run_shell_through_invoke(sandbox: LocalSandbox) -> None:
    tools = by_name(make_code_tools(sandbox))
    out = tools["run_python"].invoke({"code": "print(6 * 7)"})
    assert out.startswith("[exit code 0;") and "--- stdout ---\n42" in out
    out = tools["run_shell"].invoke({"command": "echo bad >&2; exit 4"})
    assert "exit code 4" in out and "--- stderr ---\nbad" in out
    out = tools["run_python"].invoke(
        {"code": "import sys; print(sys.stdin.read()[::-1])", "stdin": "abc"}
    )
    assert "cba" in out
    out = tools["run_python"].invoke({"code": "raise ValueError('nope')"})
    assert "exit code 1" in out and "ValueError: nope" in out


def test_ordinary_failures_are_answers_not_exceptions(sandbox: LocalSandbox) -> None:
    tools = by_name(make_code_tools(sandbox, max_output_chars=3000))
    out = tools["run_python"].invoke({"code": "while True: pass"})
    assert "timed out" in out and "no exit code" in out
    out = tools["run_shell"].invoke({"command": "yes"})
    assert "killed: output over" in out and "[output truncated" in out
    assert len(out) < 4000  # clipped for the model's context


async def test_tools_work_with_ainvoke(sandbox: LocalSandbox, tmp_path: Path) -> None:
    tools = by_name(make_code_tools(sandbox, workdir=tmp_path))
    out = await tools["run_shell"].ainvoke({"command": "echo async > a.txt; cat a.txt"})
    assert "async" in out
    assert await tools["read_file"].ainvoke({"path": "a.txt"}) == "async\n"


def test_workspace_files_round_trip(sandbox: LocalSandbox, tmp_path: Path) -> None:
    tools = by_name(make_code_tools(sandbox, workdir=tmp_path))
    assert tools["write_file"].invoke({"path": "pkg/mod.py", "content": "X = 41\n"}) == (
        "wrote 7 bytes to pkg/mod.py"
    )
    out = tools["run_python"].invoke({"code": "from pkg.mod import X; print(X + 1)"})
    assert "42" in out
    # The sandbox may edit what the host wrote (the workspace is handed to it)...
    assert "exit code 0" in tools["run_shell"].invoke({"command": "echo 'Y = 1' >> pkg/mod.py"})
    # ...and the host reads what the sandbox wrote.
    assert tools["read_file"].invoke({"path": "pkg/mod.py"}) == "X = 41\nY = 1\n"
    assert tools["read_file"].invoke({"path": str(tmp_path / "pkg/mod.py")}).startswith("X = 41")
    assert tools["read_file"].invoke({"path": "nope.txt"}).startswith("error:")
    assert "not a regular file" in tools["read_file"].invoke({"path": "pkg"})


def test_file_tools_cannot_leave_the_workspace(sandbox: LocalSandbox, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("host secret")
    tools = by_name(make_code_tools(sandbox, workdir=ws))
    # The sandboxed code plants links pointing out of the workspace.
    planted = tools["run_shell"].invoke(
        {"command": f"ln -s {outside} leak; ln -s {tmp_path} dirleak; ln -s /etc etc; echo ok"}
    )
    assert "exit code 0" in planted
    attempts = [
        ("read_file", {"path": "../outside.txt"}),
        ("read_file", {"path": str(outside)}),
        ("read_file", {"path": "/etc/passwd"}),
        ("read_file", {"path": "leak"}),
        ("read_file", {"path": "dirleak/outside.txt"}),
        ("read_file", {"path": "etc/passwd"}),
        ("write_file", {"path": "leak", "content": "overwritten"}),
        ("write_file", {"path": "dirleak/new.txt", "content": "x"}),
        ("write_file", {"path": "../new.txt", "content": "x"}),
        ("write_file", {"path": "/tmp/new.txt", "content": "x"}),
        ("write_file", {"path": ".", "content": "x"}),
    ]
    for name, args in attempts:
        out = tools[name].invoke(args)
        assert out.startswith("error:"), (name, args, out)
        assert "host secret" not in out and "root:" not in out
    assert outside.read_text() == "host secret"
    assert not (tmp_path / "new.txt").exists()
    assert os.path.islink(ws / "leak")


def test_hard_linked_files_are_not_written(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep")
    os.link(target, ws / "linked.txt")
    with pytest.raises(WorkspacePathError):
        write_workspace_file(ws, "linked.txt", "changed")
    assert target.read_text() == "keep"
    write_workspace_file(ws, "big.txt", "x" * 10)
    with pytest.raises(WorkspacePathError):
        write_workspace_file(ws, "big.txt", "x" * 11, max_bytes=10)
    assert read_workspace_file(ws, "big.txt", max_bytes=4).startswith("xxxx\n[file truncated")


def test_any_executor_backs_the_tools() -> None:
    """The tools depend on the protocol only; a recoverable error is shown to the model."""

    class Flaky(BaseCodeExecutor):
        def __init__(self) -> None:
            self.requests: list[ExecRequest] = []

        def execute(self, request: ExecRequest) -> ExecResult:
            self.requests.append(request)
            if request.language == "bash":
                raise SandboxExecutionError("process budget used up, retry")
            return ExecResult(
                stdout="fake\n", stderr="", exit_code=0, duration_s=0.0, limits=LIMITS
            )

    flaky = Flaky()
    tools = by_name(make_code_tools(flaky))
    assert "fake" in tools["run_python"].invoke({"code": "anything"})
    out = tools["run_shell"].invoke({"command": "ls"})
    assert out.startswith("error:") and "retry" in out
    assert [r.language for r in flaky.requests] == ["python", "bash"]

    class Broken(BaseCodeExecutor):
        def execute(self, request: ExecRequest) -> ExecResult:
            raise SandboxUnavailableError("no sandbox here")

    with pytest.raises(SandboxUnavailableError):
        by_name(make_code_tools(Broken()))["run_python"].invoke({"code": "x"})
