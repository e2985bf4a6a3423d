"""A started LocalSandbox for tests, failing loudly when isolation is missing; small limits.

Isolation works on these machines, so a sandbox that cannot isolate is a
test failure, not a skip; ``PACORE_SANDBOX_ALLOW_UNISOLATED=1`` turns it into
a skip on a machine known to lack namespaces (never in CI).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from pacore_graph.tools.sandbox import MIB, LocalSandbox, SandboxLimits, SandboxUnavailableError

__all__ = ["SMALL", "started_sandbox"]

#: Limits small enough that a test's runaway program is stopped in seconds.
SMALL = SandboxLimits(
    wall_time_s=3.0,
    cpu_time_s=2,
    memory_bytes=256 * MIB,
    max_processes=16,
    max_file_bytes=1 * MIB,
    max_output_bytes=256 * 1024,
)


@contextmanager
def started_sandbox(limits: SandboxLimits) -> Iterator[LocalSandbox]:
    if not sys.platform.startswith("linux"):
        pytest.skip("LocalSandbox needs Linux")
    sb = LocalSandbox(limits)
    try:
        sb.start()
    except SandboxUnavailableError as exc:
        if os.environ.get("PACORE_SANDBOX_ALLOW_UNISOLATED") == "1":
            pytest.skip(f"sandbox isolation unavailable here: {exc}")
        pytest.fail(f"the sandbox cannot isolate code on this machine: {exc}")
    try:
        yield sb
    finally:
        sb.shutdown()
