"""Test and benchmark helpers: a scripted and a throughput-bound OpenAI-compatible server.

Kept in the package (not under ``tests/``) so benchmarks, examples and users'
own test suites can run PaCoRe graphs against a fast, deterministic endpoint.

Names are loaded lazily (PEP 562) so that ``python -m
pacore_graph.testing.scripted_server`` does not import the module twice, which
``runpy`` warns about.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pacore_graph.testing.scripted_server import (
        DISCONNECT_STATUS,
        FailureMode,
        LoggedRequest,
        ReasoningMode,
        RespondFn,
        ScriptedReply,
        ScriptedRequest,
        ScriptedServer,
        ScriptedToolCall,
        count_tokens,
        default_respond,
    )
    from pacore_graph.testing.throughput_server import LengthModel, ThroughputServer

__all__ = [
    "DISCONNECT_STATUS",
    "FailureMode",
    "LengthModel",
    "LoggedRequest",
    "ReasoningMode",
    "RespondFn",
    "ScriptedReply",
    "ScriptedRequest",
    "ScriptedServer",
    "ScriptedToolCall",
    "ThroughputServer",
    "count_tokens",
    "default_respond",
]


_THROUGHPUT = frozenset({"LengthModel", "ThroughputServer"})


def __getattr__(name: str) -> Any:
    if name in __all__:
        module = "throughput_server" if name in _THROUGHPUT else "scripted_server"
        value = getattr(importlib.import_module(f"pacore_graph.testing.{module}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
