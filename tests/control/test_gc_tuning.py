"""The batch GC setting is scoped: the previous thresholds come back."""

from __future__ import annotations

import gc

import pytest

from pacore_graph.control.gc_tuning import FAN_OUT_GC_THRESHOLDS, fan_out_gc


def test_fan_out_gc_sets_and_restores_the_thresholds() -> None:
    before = gc.get_threshold()
    with fan_out_gc():
        assert gc.get_threshold() == FAN_OUT_GC_THRESHOLDS
    assert gc.get_threshold() == before


def test_fan_out_gc_restores_after_an_error() -> None:
    before = gc.get_threshold()
    with pytest.raises(RuntimeError), fan_out_gc():
        raise RuntimeError("boom")
    assert gc.get_threshold() == before
