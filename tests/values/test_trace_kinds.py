"""values/trace_kinds: the one list of tracing destinations, for the settings and the exporters.

The list is offered by the ``trace`` setting (``--trace``) and honoured by
``configure_tracing``; both must read this one tuple, and reading it must not
load OpenTelemetry (the command-line parser imports it to build its help).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pacore_graph.otel.exporters import TracingConfigError, configure_tracing
from pacore_graph.settings.fields import SETTINGS
from pacore_graph.values.trace_kinds import TRACE_KINDS

#: Enough for every kind to build its exporter (Langfuse needs its keys).
ENV = {"LANGFUSE_PUBLIC_KEY": "pk", "LANGFUSE_SECRET_KEY": "sk"}


def test_the_trace_setting_offers_exactly_these_kinds() -> None:
    assert tuple(SETTINGS["trace"].choices or ()) == TRACE_KINDS


@pytest.mark.parametrize("kind", TRACE_KINDS)
def test_configure_tracing_builds_every_kind(kind: str) -> None:
    provider = configure_tracing(kind, batch=False, env=ENV)
    try:
        assert len(provider._active_span_processor._span_processors) == 1
    finally:
        provider.shutdown()


def test_a_kind_outside_the_list_is_refused_naming_the_list() -> None:
    with pytest.raises(TracingConfigError, match=", ".join(TRACE_KINDS)):
        configure_tracing("zipkin", env=ENV)


def test_reading_the_kinds_loads_no_opentelemetry() -> None:
    code = (
        "import json, sys\n"
        "from pacore_graph.values.trace_kinds import TRACE_KINDS\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(done.stdout)
    assert "pacore_graph.values.trace_kinds" in loaded
    assert not [m for m in loaded if m.split(".")[0] == "opentelemetry"]
