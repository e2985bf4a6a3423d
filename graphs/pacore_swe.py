"""PaCoRe for software engineering: parallel bug-fixing attempts, synthesised into one diff.

Given a repository, an issue and a test command:

- every explorer works in its **own copy** of the repository with sandboxed
  tools (read and write files, run shell commands and Python, run the tests),
  and ends with a unified diff of its copy and the outcome of the test command
  (``Trajectory.artifacts``: ``diff``, ``tests_passed``, ``test_summary``);
- the compacted message is that diff plus the test summary
  (:class:`SWECompactor`), so the next round reads what each attempt changed
  and whether it worked, not its tool transcript;
- the final K=1 round writes one fix in its own copy; its diff is applied to a
  fresh copy of the repository and verified with the test command
  (:func:`run_swe` returns an :class:`SWEOutcome`).

All model-written code, including the test runs, executes in
:class:`~pacore_graph.tools.sandbox.LocalSandbox` (time, memory, process,
file and output limits, no network, scrubbed environment).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool, StructuredTool

from pacore_graph.graph.builder import ainvoke_pacore, build_pacore_graph
from pacore_graph.graph.explorer import ExploreTask
from pacore_graph.graph.tool_explorer import ToolSession, build_tool_explorer
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.tools.code_executor import make_code_tools
from pacore_graph.tools.sandbox import (
    MIB,
    CodeExecutor,
    ExecRequest,
    LocalSandbox,
    SandboxExecutionError,
    SandboxLimits,
    check_workdir,
)
from pacore_graph.tools.workspace import apply_diff, changed_files, copy_tree, diff_trees, list_tree
from pacore_graph.values.compaction import split_conclusion
from pacore_graph.values.records import PaCoReResult, Trajectory

__all__ = [
    "SWE_LIMITS",
    "SWE_MAX_DIFF_CHARS",
    "SWE_SYSTEM_PROMPT",
    "SWECompactor",
    "SWEOutcome",
    "SWESession",
    "build_swe_graph",
    "check_repository",
    "run_swe",
    "swe_problem",
]

SWE_SYSTEM_PROMPT = """\
You are fixing an issue in a software repository. The repository is your working directory.
Tools: list_files(), read_file(path), write_file(path, content), run_shell(command),
run_python(code) and run_tests() (runs the project's test command).
Read the relevant code, edit the files to fix the issue, run the tests, and when you are
done answer with a short explanation of the fix, without calling a tool."""

#: Sandbox limits for SWE work: test suites need more time and memory than snippets,
#: but one call as a whole stays within 2 GiB of process memory and a 512 MiB
#: workspace (which lives in memory while the call runs).
SWE_LIMITS = SandboxLimits(
    wall_time_s=120.0,
    cpu_time_s=120,
    memory_bytes=2048 * MIB,
    max_total_memory_bytes=2048 * MIB,
    max_workspace_bytes=512 * MIB,
)

#: Most characters of one attempt's diff passed on to the next round (the rest is cut,
#: with a note); the full diff, itself capped by ``diff_trees``, stays in the artifacts.
SWE_MAX_DIFF_CHARS = 16_000

_TEST_TAIL_CHARS = 1500


def swe_problem(issue: str, test_command: str) -> str:
    """The user message every explorer starts from."""
    return (
        f"Fix this issue in the repository.\n\n{issue.strip()}\n\n"
        f"The tests are run with: {test_command}"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SWEOutcome:
    """The synthesised fix and its verification on a fresh copy of the repository."""

    result: PaCoReResult
    diff: str
    applied: bool
    tests_passed: bool
    test_output: str
    apply_message: str = ""

    @property
    def resolved(self) -> bool:
        return self.applied and self.tests_passed and bool(self.diff.strip())


class SWESession:
    """One explorer's repository copy, its tools, and the diff + tests at the end."""

    def __init__(
        self, repo: Path, test_command: str, executor: CodeExecutor, workspace: Path
    ) -> None:
        self.repo = repo
        self.test_command = test_command
        self.executor = executor
        self.workspace = workspace
        self.tools: list[BaseTool] = [
            *make_code_tools(executor, workdir=workspace),
            StructuredTool.from_function(
                coroutine=self._run_tests,
                func=None,
                name="run_tests",
                description=f"Run the project's tests ({test_command}) in the workspace.",
            ),
            StructuredTool.from_function(
                func=self._list_files,
                name="list_files",
                description="List the repository's files (relative paths).",
            ),
        ]

    def _list_files(self) -> str:
        return "\n".join(list_tree(self.workspace))

    async def _run_tests(self) -> str:
        result = await self.executor.aexecute(
            ExecRequest(code=self.test_command, language="bash", workdir=self.workspace)
        )
        return result.to_tool_output()

    async def finish(self, trajectory: Trajectory) -> Trajectory:
        diff = diff_trees(self.repo, self.workspace)
        result = await self.executor.aexecute(
            ExecRequest(code=self.test_command, language="bash", workdir=self.workspace)
        )
        passed = result.exit_code == 0 and not result.timed_out
        tail = (result.stdout + result.stderr)[-_TEST_TAIL_CHARS:]
        summary = f"{'PASSED' if passed else 'FAILED'} (exit code {result.exit_code})\n{tail}"
        return replace(
            trajectory,
            artifacts={
                **trajectory.artifacts,
                "diff": diff.text,
                "diff_left_out": list(diff.left_out),
                "files_changed": changed_files(self.repo, self.workspace),
                "tests_passed": passed,
                "test_summary": summary.strip(),
            },
        )

    async def close(self) -> None:
        shutil.rmtree(self.workspace, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class SWECompactor:
    """The message of an attempt: its diff, its test outcome, and its short explanation."""

    name: str = "swe"
    max_diff_chars: int = SWE_MAX_DIFF_CHARS

    def compact(self, trajectory: Trajectory) -> str:
        art = trajectory.artifacts
        diff = str(art.get("diff") or "").strip() or "(no changes)"
        if len(diff) > self.max_diff_chars:
            cut = len(diff) - self.max_diff_chars
            diff = f"{diff[: self.max_diff_chars]}\n[... diff cut: {cut} more characters]"
        left_out = [str(x) for x in art.get("diff_left_out") or ()]
        if left_out:
            diff += "\n[changes not in the diff: " + "; ".join(left_out[:20]) + "]"
        tests = str(art.get("test_summary") or "not run")
        explanation = split_conclusion(trajectory.content).strip()
        return (
            f"Proposed diff:\n```diff\n{diff}\n```\n"
            f"Test result: {tests}\n\nExplanation: {explanation}"
        )


def check_repository(repo: Path) -> Path:
    """The resolved repository path, or ValueError for one that is no repository to copy.

    Every explorer copies it, so ``/``, a system directory or a home directory
    (or one holding it) is refused, as the sandbox refuses them as workspaces.
    """
    path = Path(repo).resolve()
    if not path.is_dir():
        raise ValueError(f"repository {path} is not a directory")
    try:
        check_workdir(path)
    except SandboxExecutionError as exc:
        raise ValueError(str(exc).replace("workspace", "repository", 1)) from None
    return path


def build_swe_graph(
    chat_model: BaseChatModel,
    repo: Path,
    test_command: str,
    *,
    config: PaCoReConfig | None = None,
    executor: CodeExecutor | None = None,
    max_steps: int = 12,
    workspace_root: Path | None = None,
    **kwargs: Any,
) -> Any:
    """The SWE PaCoRe graph: tool explorers, each in its own copy of ``repo``."""
    repo = check_repository(repo)
    if not test_command.strip():
        raise ValueError("a test command is required to verify attempts (e.g. 'pytest -q')")
    sandbox = executor or LocalSandbox(SWE_LIMITS)

    async def session(task: ExploreTask) -> ToolSession:
        where = Path(
            tempfile.mkdtemp(prefix=f"pacore-swe-r{task.round}.{task.index}-", dir=workspace_root)
        )
        copy_tree(repo, where)
        return SWESession(repo, test_command, sandbox, where)

    explorer = build_tool_explorer(
        chat_model, session, max_steps=max_steps, system_prompt=SWE_SYSTEM_PROMPT
    )
    return build_pacore_graph(
        config=config or PaCoReConfig(),
        explorer=explorer,
        compactor=kwargs.pop("compactor", SWECompactor()),
        name="pacore_swe",
        **kwargs,
    )


async def run_swe(
    chat_model: BaseChatModel,
    repo: Path,
    issue: str,
    test_command: str,
    *,
    config: PaCoReConfig | None = None,
    executor: CodeExecutor | None = None,
    max_steps: int = 12,
    **kwargs: Any,
) -> SWEOutcome:
    """Run the SWE graph, then apply the final diff to a fresh copy and run the tests."""
    if not issue.strip():
        raise ValueError("empty issue text")
    sandbox = executor or LocalSandbox(SWE_LIMITS)
    graph = build_swe_graph(
        chat_model,
        repo,
        test_command,
        config=config,
        executor=sandbox,
        max_steps=max_steps,
        **kwargs,
    )
    result = await ainvoke_pacore(graph, swe_problem(issue, test_command))
    diff = str(result.final.artifacts.get("diff") or "")
    fresh = Path(tempfile.mkdtemp(prefix="pacore-swe-verify-"))
    try:
        copy_tree(Path(repo).resolve(), fresh)
        applied = apply_diff(diff, fresh)
        if not applied.applied:
            return SWEOutcome(
                result=result,
                diff=diff,
                applied=False,
                tests_passed=False,
                test_output="",
                apply_message=applied.message,
            )
        check = await sandbox.aexecute(
            ExecRequest(code=test_command, language="bash", workdir=fresh)
        )
        return SWEOutcome(
            result=result,
            diff=diff,
            applied=True,
            tests_passed=check.exit_code == 0 and not check.timed_out,
            test_output=(check.stdout + check.stderr)[-4000:],
        )
    finally:
        shutil.rmtree(fresh, ignore_errors=True)
