"""Agent tools for explorers, installed as ``pacore_graph.tools``.

:mod:`pacore_graph.tools.sandbox` runs untrusted code (the executor protocol,
its values and errors, and the local subprocess sandbox);
:mod:`pacore_graph.tools.code_executor` turns an executor into LangChain tools;
:mod:`pacore_graph.tools.workspace` copies, diffs and patches the repository
workspaces of the SWE graph.
"""

from pacore_graph.tools.code_executor import WorkspacePathError, make_code_tools
from pacore_graph.tools.sandbox import (
    BaseCodeExecutor,
    CodeExecutor,
    ExecRequest,
    ExecResult,
    Isolation,
    LocalSandbox,
    SandboxError,
    SandboxExecutionError,
    SandboxLimits,
    SandboxUnavailableError,
)

__all__ = [
    "BaseCodeExecutor",
    "CodeExecutor",
    "ExecRequest",
    "ExecResult",
    "Isolation",
    "LocalSandbox",
    "SandboxError",
    "SandboxExecutionError",
    "SandboxLimits",
    "SandboxUnavailableError",
    "WorkspacePathError",
    "make_code_tools",
]
