"""Test and benchmark helpers: scripted, throughput-bound and hostile OpenAI-compatible servers.

Kept in the package (not under ``tests/``) so benchmarks, examples and users'
own test suites can run PaCoRe graphs against a fast, deterministic endpoint.

Names are loaded lazily (PEP 562) so that ``python -m
pacore_graph.testing.scripted_server`` does not import the module twice, which
``runpy`` warns about.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pacore_graph.lazy import lazy_getattr

if TYPE_CHECKING:
    from pacore_graph.testing.hostile_upstream import HostileServer
    from pacore_graph.testing.method_oracle import MethodOracle
    from pacore_graph.testing.script import (
        RespondFn,
        ScriptedReply,
        ScriptedRequest,
        ScriptedToolCall,
    )
    from pacore_graph.testing.scripted_server import (
        DISCONNECT_STATUS,
        FailureMode,
        LoggedRequest,
        ReasoningMode,
        ScriptedServer,
        count_tokens,
        default_respond,
    )
    from pacore_graph.testing.throughput_server import LengthModel, ThroughputServer

__all__ = [
    "DISCONNECT_STATUS",
    "FailureMode",
    "HostileServer",
    "LengthModel",
    "LoggedRequest",
    "MethodOracle",
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
_LOCATIONS = {
    name: "throughput_server" if name in _THROUGHPUT else "scripted_server" for name in __all__
}
_LOCATIONS["HostileServer"] = "hostile_upstream"
_LOCATIONS["MethodOracle"] = "method_oracle"
_LOCATIONS.update(
    dict.fromkeys(("RespondFn", "ScriptedReply", "ScriptedRequest", "ScriptedToolCall"), "script")
)

__getattr__ = lazy_getattr(__name__, _LOCATIONS, globals())
