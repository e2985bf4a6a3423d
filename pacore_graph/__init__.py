"""pacore-graph: PaCoRe (Parallel Coordinated Reasoning) as a LangGraph agent graph.

Each round fans out K parallel explorer trajectories with ``Send``, compacts
each to its conclusion, and feeds those messages to the next round; a final
K=1 round gives the answer. Start with :func:`build_pacore_graph`; its parts
(``Round``, explorers, compactors, aggregators, round plans) are here too.

Names are imported on first use (PEP 562 ``__getattr__``): ``import
pacore_graph`` must not pay for LangGraph, pydantic and aiohttp when a caller
(the ``pacore`` command's ``--help``, a benchmark's bare loop) needs none of
them. ``from pacore_graph import X`` works for every name in ``__all__``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pacore_graph.lazy import lazy_getattr

if TYPE_CHECKING:
    from pacore_graph.control.limits import SequenceLimiter
    from pacore_graph.errors import ModelCallError, PaCoReError, RoundFailedError
    from pacore_graph.graph.aggregation import FirstAnswer, MajorityVote
    from pacore_graph.graph.builder import ainvoke_pacore, build_pacore_graph
    from pacore_graph.graph.compact_step import LLMCompactor
    from pacore_graph.graph.compaction import (
        AnswerCompactor,
        Compactor,
        ConclusionCompactor,
        TokenBudgetCompactor,
        compactor_from_name,
    )
    from pacore_graph.graph.explorer import (
        ChatExplorer,
        ExploreGroup,
        Explorer,
        ExploreTask,
        GraphExplorer,
    )
    from pacore_graph.graph.messages_explorer import (
        MessagesAggregator,
        MessagesExplorer,
        round_sampling,
    )
    from pacore_graph.graph.plans import (
        ExplorerPrompt,
        RoundInput,
        RoundPlan,
        RoundPrompts,
        SynthesisPlan,
    )
    from pacore_graph.graph.prompts import SYNTHESIS_TEMPLATE, render_synthesis, synthesis_messages
    from pacore_graph.graph.records import Completion, PaCoReResult, ToolCallRecord, Trajectory
    from pacore_graph.llm.batching import SampleBatcher
    from pacore_graph.llm.client import ChatClient, OpenAICompatClient
    from pacore_graph.settings.config import PRESETS, PaCoReConfig, RetryPolicy, SamplingParams
    from pacore_graph.settings.rounds import Round


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
    "ExplorerPrompt",
    "FirstAnswer",
    "GraphExplorer",
    "LLMCompactor",
    "MajorityVote",
    "MessagesAggregator",
    "MessagesExplorer",
    "ModelCallError",
    "OpenAICompatClient",
    "PaCoReConfig",
    "PaCoReError",
    "PaCoReResult",
    "RetryPolicy",
    "Round",
    "RoundFailedError",
    "RoundInput",
    "RoundPlan",
    "RoundPrompts",
    "SampleBatcher",
    "SamplingParams",
    "SequenceLimiter",
    "SynthesisPlan",
    "TokenBudgetCompactor",
    "ToolCallRecord",
    "Trajectory",
    "__version__",
    "ainvoke_pacore",
    "build_pacore_graph",
    "compactor_from_name",
    "render_synthesis",
    "round_sampling",
    "synthesis_messages",
]

#: Where each public name lives; ``__getattr__`` imports it on first access.
_LOCATIONS: dict[str, str] = {
    "SampleBatcher": "llm.batching",
    "ChatClient": "llm.client",
    "OpenAICompatClient": "llm.client",
    "AnswerCompactor": "graph.compaction",
    "Compactor": "graph.compaction",
    "ConclusionCompactor": "graph.compaction",
    "TokenBudgetCompactor": "graph.compaction",
    "compactor_from_name": "graph.compaction",
    "PRESETS": "settings.config",
    "PaCoReConfig": "settings.config",
    "RetryPolicy": "settings.config",
    "SamplingParams": "settings.config",
    "Round": "settings.rounds",
    "ModelCallError": "errors",
    "PaCoReError": "errors",
    "RoundFailedError": "errors",
    "ChatExplorer": "graph.explorer",
    "Explorer": "graph.explorer",
    "ExploreGroup": "graph.explorer",
    "ExploreTask": "graph.explorer",
    "GraphExplorer": "graph.explorer",
    "ainvoke_pacore": "graph.builder",
    "build_pacore_graph": "graph.builder",
    "SequenceLimiter": "control.limits",
    "SYNTHESIS_TEMPLATE": "graph.prompts",
    "render_synthesis": "graph.prompts",
    "synthesis_messages": "graph.prompts",
    "Completion": "graph.records",
    "PaCoReResult": "graph.records",
    "ToolCallRecord": "graph.records",
    "Trajectory": "graph.records",
    "FirstAnswer": "graph.aggregation",
    "MajorityVote": "graph.aggregation",
    "LLMCompactor": "graph.compact_step",
    "MessagesAggregator": "graph.messages_explorer",
    "MessagesExplorer": "graph.messages_explorer",
    "round_sampling": "graph.messages_explorer",
    "ExplorerPrompt": "graph.plans",
    "RoundInput": "graph.plans",
    "RoundPlan": "graph.plans",
    "RoundPrompts": "graph.plans",
    "SynthesisPlan": "graph.plans",
}


__getattr__ = lazy_getattr(__name__, _LOCATIONS, globals())


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
