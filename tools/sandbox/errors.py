"""The sandbox's own failures, as opposed to outcomes of the code it runs.

Code that fails, times out or is killed is an ordinary result; these
exceptions mean the sandbox could not do its job, and say whether retrying
could help.
"""

from __future__ import annotations

__all__ = ["SandboxError", "SandboxExecutionError", "SandboxUnavailableError"]


class SandboxError(RuntimeError):
    """Base class of the sandbox's own failures (never of the code it runs).

    Code that fails, times out or is killed is an ordinary :class:`ExecResult`;
    these exceptions mean the sandbox could not do its job.
    """


class SandboxUnavailableError(SandboxError):
    """Terminal: this backend cannot run code at all here, and retrying will not help.

    Raised by ``start`` (or the first ``execute``) when the platform is not
    Linux, no usable Python runs as the sandbox user, the isolation that
    :attr:`SandboxLimits.require_isolation` demands cannot be set up, or the
    executor has been shut down. A run should stop rather than feed this to
    the model.
    """


class SandboxExecutionError(SandboxError):
    """Recoverable: this one call could not be started; the executor still works.

    E.g. a workspace that does not exist or that the sandbox user cannot
    reach, an interpreter that failed to ``exec``, or the sandbox uid's process
    budget momentarily used up by concurrent sandboxes. Fix the request or
    retry; the tools report it to the model as an error message.
    """
