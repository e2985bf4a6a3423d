"""What one execution may use: documented defaults, and values that cannot be limits refused."""

from __future__ import annotations

import dataclasses

import pytest

from pacore_graph.tools.sandbox import MIB, SandboxLimits


def test_limits_are_validated_and_documented_defaults() -> None:
    limits = SandboxLimits()
    assert (limits.wall_time_s, limits.cpu_time_s) == (10.0, 10)
    assert limits.memory_bytes == 512 * MIB and limits.max_processes == 64
    assert limits.max_file_bytes == 16 * MIB and limits.max_output_bytes == 1 * MIB
    assert limits.network is False and limits.require_isolation is True
    for bad in (
        {"wall_time_s": 0},
        {"cpu_time_s": 1.5},
        {"memory_bytes": 1024},
        {"max_processes": -1},
        {"max_output_bytes": True},
        {"network": "no"},
    ):
        with pytest.raises(ValueError):
            SandboxLimits(**bad)
    assert limits.replace(wall_time_s=1).wall_time_s == 1


def test_new_limits_have_documented_defaults_and_are_validated() -> None:
    limits = SandboxLimits()
    assert limits.max_total_memory_bytes == 1024 * MIB
    assert limits.max_workspace_bytes == 256 * MIB
    for bad in (
        {"max_total_memory_bytes": 0},
        {"max_total_memory_bytes": MIB},
        {"max_workspace_bytes": -1},
        {"max_workspace_bytes": 1.5},
    ):
        with pytest.raises(ValueError):
            SandboxLimits(**bad)  # type: ignore[arg-type]


def test_limits_are_frozen_and_replace_checks_the_new_values() -> None:
    limits = SandboxLimits()
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.wall_time_s = 1  # type: ignore[misc]
    with pytest.raises(ValueError):
        limits.replace(wall_time_s=0)
    changed = limits.replace(max_processes=limits.max_processes + 1)
    assert changed.max_processes == limits.max_processes + 1
    assert changed.replace(max_processes=limits.max_processes) == limits
