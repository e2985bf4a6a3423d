"""Every benchmark test runs offline: nothing is fetched, fixtures are built in the test."""

from __future__ import annotations

import pytest
from hub_fixtures import go_offline


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    go_offline(monkeypatch)
