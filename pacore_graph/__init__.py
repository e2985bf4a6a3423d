"""pacore-graph: PaCoRe (Parallel Coordinated Reasoning) as a LangGraph agent graph.

Each round fans out K parallel explorer trajectories with ``Send``, compacts
each to its conclusion, and feeds those messages to the next round; a final
K=1 round gives the answer. Start with :func:`build_pacore_graph`.

Names are imported on first use (PEP 562 ``__getattr__``): ``import
pacore_graph`` must not pay for LangGraph, pydantic and aiohttp when a caller
(the ``pacore`` command's ``--help``, a benchmark's bare loop) needs none of
them. ``from pacore_graph import X`` works for every name in ``__all__``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pacore_graph.lazy import lazy_getattr

if TYPE_CHECKING:
    from pacore_graph.batching import SampleBatcher
    from pacore_graph.client import ChatClient, OpenAICompatClient
    from pacore_graph.compaction import (
        AnswerCompactor,
        Compactor,
        ConclusionCompactor,
        TokenBudgetCompactor,
        compactor_from_name,
    )
    from pacore_graph.config import PRESETS, PaCoReConfig, RetryPolicy, SamplingParams
    from pacore_graph.errors import ModelCallError, PaCoReError, RoundFailedError
    from pacore_graph.explorer import (
        ChatExplorer,
        ExploreGroup,
        Explorer,
        ExploreTask,
        GraphExplorer,
    )
    from pacore_graph.graph import ainvoke_pacore, build_pacore_graph
    from pacore_graph.limits import SequenceLimiter
    from pacore_graph.prompts import SYNTHESIS_TEMPLATE, render_synthesis, synthesis_messages
    from pacore_graph.records import Completion, PaCoReResult, ToolCallRecord, Trajectory


__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "SYNTHESIS_TEMPLATE",
    "AnswerCompactor",
    "ChatClient",
    "ChatExplorer",
    "Compactor",
    "Completion",
    "ConclusionCompactor",
    "ExploreGroup",
    "ExploreTask",
    "Explorer",
    "GraphExplorer",
    "ModelCallError",
    "OpenAICompatClient",
    "PaCoReConfig",
    "PaCoReError",
    "PaCoReResult",
    "RetryPolicy",
    "RoundFailedError",
    "SampleBatcher",
    "SamplingParams",
    "SequenceLimiter",
    "TokenBudgetCompactor",
    "ToolCallRecord",
    "Trajectory",
    "__version__",
    "ainvoke_pacore",
    "build_pacore_graph",
    "compactor_from_name",
    "render_synthesis",
    "synthesis_messages",
]

#: Where each public name lives; ``__getattr__`` imports it on first access.
_LOCATIONS: dict[str, str] = {
    "SampleBatcher": "batching",
    "ChatClient": "client",
    "OpenAICompatClient": "client",
    "AnswerCompactor": "compaction",
    "Compactor": "compaction",
    "ConclusionCompactor": "compaction",
    "TokenBudgetCompactor": "compaction",
    "compactor_from_name": "compaction",
    "PRESETS": "config",
    "PaCoReConfig": "config",
    "RetryPolicy": "config",
    "SamplingParams": "config",
    "ModelCallError": "errors",
    "PaCoReError": "errors",
    "RoundFailedError": "errors",
    "ChatExplorer": "explorer",
    "Explorer": "explorer",
    "ExploreGroup": "explorer",
    "ExploreTask": "explorer",
    "GraphExplorer": "explorer",
    "ainvoke_pacore": "graph",
    "build_pacore_graph": "graph",
    "SequenceLimiter": "limits",
    "SYNTHESIS_TEMPLATE": "prompts",
    "render_synthesis": "prompts",
    "synthesis_messages": "prompts",
    "Completion": "records",
    "PaCoReResult": "records",
    "ToolCallRecord": "records",
    "Trajectory": "records",
}


__getattr__ = lazy_getattr(__name__, _LOCATIONS, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
