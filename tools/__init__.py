"""Agent tools for explorers, installed as ``pacore_graph.tools``.

:mod:`pacore_graph.tools.sandbox` runs untrusted code (the executor protocol,
its values and errors, and the local subprocess sandbox);
:mod:`pacore_graph.tools.code_executor` turns an executor into LangChain tools;
:mod:`pacore_graph.tools.workspace` copies, diffs and patches the repository
workspaces of the SWE graph; :mod:`pacore_graph.tools.trajectories` lists, reads
and searches a round's trajectories (the aggregator agent's tools).
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
from pacore_graph.tools.trajectories import TrajectoryToolLimits, make_trajectory_tools

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
    "TrajectoryToolLimits",
    "WorkspacePathError",
    "make_code_tools",
    "make_trajectory_tools",
]
