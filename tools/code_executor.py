"""LangChain tools that let a model run code and edit files, through a :class:`CodeExecutor`.

Any LangGraph agent (the tool explorer, ``create_react_agent``, a ``ToolNode``)
can use them: they are plain ``BaseTool`` objects with typed arguments.

* ``run_python(code, stdin="")`` and ``run_shell(command, stdin="")`` run in the
  executor's sandbox and return :meth:`ExecResult.to_tool_output` text: exit
  code, stdout, stderr, and whether it timed out or was truncated. A failing,
  crashing or timed-out program is an ordinary answer the model can act on,
  never an exception; so is a call the sandbox could not start
  (:class:`SandboxExecutionError`). Only a sandbox that cannot work at all
  (:class:`SandboxUnavailableError`) raises, so the run stops instead of the
  model retrying forever.
* ``read_file(path)`` and ``write_file(path, content)`` (only with a
  ``workdir``) run in this process but are confined to the workspace: paths
  are relative to it, ``..`` is refused, and no symlink is ever followed (each
  component is opened with ``O_NOFOLLOW`` relative to its parent directory),
  so a link the sandboxed code planted cannot lead them outside.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from pacore_graph.errors import PaCoReError
from pacore_graph.tools.sandbox import (
    CodeExecutor,
    ExecRequest,
    ExecResult,
    Language,
    SandboxExecutionError,
    check_workdir,
)

__all__ = [
    "WorkspacePathError",
    "make_code_tools",
    "read_workspace_file",
    "write_workspace_file",
]

_DEFAULT_MAX_OUTPUT_CHARS = 20_000
_DEFAULT_MAX_READ_BYTES = 256 * 1024
_DEFAULT_MAX_WRITE_BYTES = 16 * 1024 * 1024


class WorkspacePathError(PaCoReError):
    """A file-tool path that would leave the workspace (``..``, absolute, symlink)."""


class _RunPythonArgs(BaseModel):
    code: str = Field(description="Python 3 source to run, e.g. a script that prints results.")
    stdin: str = Field(default="", description="Text given to the program on standard input.")


class _RunShellArgs(BaseModel):
    command: str = Field(description="A bash command line, e.g. 'ls -la' or 'pytest -q'.")
    stdin: str = Field(default="", description="Text given to the command on standard input.")


class _ReadFileArgs(BaseModel):
    path: str = Field(description="Path of the file, relative to the workspace.")


class _WriteFileArgs(BaseModel):
    path: str = Field(description="Path of the file, relative to the workspace.")
    content: str = Field(description="The complete new content of the file.")


def make_code_tools(
    executor: CodeExecutor,
    *,
    workdir: str | os.PathLike[str] | None = None,
    max_output_chars: int = _DEFAULT_MAX_OUTPUT_CHARS,
    max_read_bytes: int = _DEFAULT_MAX_READ_BYTES,
    max_write_bytes: int = _DEFAULT_MAX_WRITE_BYTES,
) -> list[BaseTool]:
    """Tools bound to ``executor`` (and to ``workdir`` when given).

    With a ``workdir`` every call runs there, so files persist between calls
    and ``read_file`` / ``write_file`` are included; without one each run gets
    a fresh empty directory and only ``run_python`` / ``run_shell`` are given.
    The executor's own limits apply; the model cannot change them.
    """
    root = Path(workdir).resolve() if workdir is not None else None
    if root is not None and not root.is_dir():
        raise ValueError(f"workdir {root} is not a directory")
    if root is not None:
        try:
            check_workdir(root)  # the file tools would otherwise reach all of it
        except SandboxExecutionError as exc:
            raise ValueError(str(exc)) from None
    where = (
        "in the workspace directory (files persist between calls)"
        if root is not None
        else "in a fresh empty directory (nothing persists between calls)"
    )

    def request(code: str, language: Language, stdin: str) -> ExecRequest:
        return ExecRequest(code=code, language=language, workdir=root, stdin=stdin)

    def render(result: ExecResult) -> str:
        return result.to_tool_output(max_chars=max_output_chars)

    # Bad input from the model (NUL bytes, lone surrogates) is a ValueError of
    # ExecRequest: an answer the model can act on, like a call that could not start.
    def execute(code: str, language: Language, stdin: str) -> str:
        try:
            return render(executor.execute(request(code, language, stdin)))
        except ValueError as exc:
            return f"error: cannot run this: {exc}"
        except SandboxExecutionError as exc:
            return f"error: the sandbox could not run this: {exc}"

    async def aexecute(code: str, language: Language, stdin: str) -> str:
        try:
            return render(await executor.aexecute(request(code, language, stdin)))
        except ValueError as exc:
            return f"error: cannot run this: {exc}"
        except SandboxExecutionError as exc:
            return f"error: the sandbox could not run this: {exc}"

    # The tools' parameter names are the model-facing schema (code vs command).
    def run_python(code: str, stdin: str = "") -> str:
        return execute(code, "python", stdin)

    async def arun_python(code: str, stdin: str = "") -> str:
        return await aexecute(code, "python", stdin)

    def run_shell(command: str, stdin: str = "") -> str:
        return execute(command, "bash", stdin)

    async def arun_shell(command: str, stdin: str = "") -> str:
        return await aexecute(command, "bash", stdin)

    limits_note = "It has no network access and limited time, memory and output."
    tools: list[BaseTool] = [
        StructuredTool.from_function(
            func=run_python,
            coroutine=arun_python,
            name="run_python",
            description=(
                f"Run a Python 3 program {where} and return its exit code, stdout and "
                f"stderr. Print what you want to see. {limits_note}"
            ),
            args_schema=_RunPythonArgs,
        ),
        StructuredTool.from_function(
            func=run_shell,
            coroutine=arun_shell,
            name="run_shell",
            description=(
                f"Run a bash command {where} and return its exit code, stdout and "
                f"stderr (e.g. to list files, grep, or run tests). {limits_note}"
            ),
            args_schema=_RunShellArgs,
        ),
    ]
    if root is None:
        return tools

    def read_file(path: str) -> str:
        try:
            return read_workspace_file(root, path, max_bytes=max_read_bytes)
        except (OSError, ValueError, WorkspacePathError) as exc:  # ValueError: a NUL in the path
            return f"error: {exc}"

    def write_file(path: str, content: str) -> str:
        try:
            size = write_workspace_file(root, path, content, max_bytes=max_write_bytes)
        except (OSError, ValueError, WorkspacePathError) as exc:  # ValueError: NUL, bad text
            return f"error: {exc}"
        return f"wrote {size} bytes to {path}"

    tools += [
        StructuredTool.from_function(
            func=read_file,
            name="read_file",
            description="Read a text file of the workspace (path relative to the workspace).",
            args_schema=_ReadFileArgs,
        ),
        StructuredTool.from_function(
            func=write_file,
            name="write_file",
            description=(
                "Create or overwrite a text file of the workspace with the given content "
                "(path relative to the workspace; missing directories are created)."
            ),
            args_schema=_WriteFileArgs,
        ),
    ]
    return tools


def _parts(root: Path, path: str) -> list[str]:
    """The components of ``path`` below ``root``; refuses anything that could leave it."""
    if not path or "\x00" in path:
        raise WorkspacePathError("empty or invalid path")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise WorkspacePathError("path is not valid Unicode text (lone surrogate)") from None
    pure = PurePosixPath(path)
    if pure.is_absolute():
        try:
            pure = pure.relative_to(PurePosixPath(root))
        except ValueError:
            raise WorkspacePathError(f"{path}: outside the workspace") from None
    parts = [p for p in pure.parts if p != "."]
    if not parts:
        raise WorkspacePathError(f"{path}: names the workspace itself, not a file")
    if ".." in parts:
        raise WorkspacePathError(f"{path}: '..' is not allowed")
    return parts


@contextmanager
def _parent_dir(root: Path, parts: list[str], *, create: bool) -> Iterator[int]:
    """A descriptor of the directory holding ``parts[-1]``, reached without symlinks."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts[:-1]:
            try:
                nxt = os.open(
                    name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
                )
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                nxt = os.open(
                    name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
                )
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise WorkspacePathError(
                        f"{'/'.join(parts)}: {name} is a symlink or not a directory"
                    ) from None
                raise
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def _open_final(dir_fd: int, parts: list[str], flags: int) -> int:
    try:
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise WorkspacePathError(f"{'/'.join(parts)}: is a symlink (not followed)") from None
        raise


def read_workspace_file(
    root: str | os.PathLike[str], path: str, *, max_bytes: int = _DEFAULT_MAX_READ_BYTES
) -> str:
    """Text of a regular file inside ``root`` (at most ``max_bytes``, with a note if cut)."""
    base = Path(root).resolve()
    parts = _parts(base, path)
    with _parent_dir(base, parts, create=False) as dir_fd:
        fd = _open_final(dir_fd, parts, os.O_RDONLY | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise WorkspacePathError(f"{path}: not a regular file")
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read(max_bytes + 1)
        finally:
            os.close(fd)
    text = data[:max_bytes].decode("utf-8", "replace")
    if len(data) > max_bytes:
        text += f"\n[file truncated: showing the first {max_bytes} of {st.st_size} bytes]"
    return text


def write_workspace_file(
    root: str | os.PathLike[str],
    path: str,
    content: str,
    *,
    max_bytes: int = _DEFAULT_MAX_WRITE_BYTES,
) -> int:
    """Write ``content`` to a file inside ``root``; returns the number of bytes written.

    Refuses files with other hard links: writing one would change a file that
    may live outside the workspace.
    """
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{path}: content is not valid Unicode text (lone surrogate at character {exc.start})"
        ) from None
    if len(data) > max_bytes:
        raise WorkspacePathError(f"{path}: content of {len(data)} bytes is over {max_bytes}")
    base = Path(root).resolve()
    parts = _parts(base, path)
    with _parent_dir(base, parts, create=True) as dir_fd:
        fd = _open_final(dir_fd, parts, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise WorkspacePathError(f"{path}: not a regular file")
            if st.st_nlink > 1:
                raise WorkspacePathError(f"{path}: has other hard links; not written")
            os.ftruncate(fd, 0)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    return len(data)
