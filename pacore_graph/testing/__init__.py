"""Test and benchmark helpers: a scripted OpenAI-compatible chat server.

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

__all__ = [
    "DISCONNECT_STATUS",
    "FailureMode",
    "LoggedRequest",
    "ReasoningMode",
    "RespondFn",
    "ScriptedReply",
    "ScriptedRequest",
    "ScriptedServer",
    "ScriptedToolCall",
    "count_tokens",
    "default_respond",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        value = getattr(importlib.import_module("pacore_graph.testing.scripted_server"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
