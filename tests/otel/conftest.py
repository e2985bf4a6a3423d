"""Fixtures of the tracing tests: one real Phoenix per session (it takes 10-15 s to start)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from phoenix_support import Phoenix, running_phoenix


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Phoenix]:
    with running_phoenix(tmp_path_factory.mktemp("phoenix")) as server:
        yield server
