"""pacore-graph: PaCoRe (Parallel Coordinated Reasoning) as a LangGraph agent graph.

Each round fans out K parallel explorer trajectories with ``Send``, compacts
each to its conclusion, and feeds those messages to the next round; a final
K=1 round gives the answer. Start with :func:`build_pacore_graph`.

``__all__`` is the public API, what the docs and examples import from here
(``tests/test_pacore_graph_init.py`` holds it to that): the builders (PaCoRe
and every other method, or one by name), the configuration, the composable
parts (explorers, compactors, round plans, aggregators, early stops), the
clients, the results and the errors a caller catches. Internals (the request
batcher, the sequence limiter, the explorer's grouping) stay importable from
their modules and are not here. No name here is one of LangGraph's public
names, so ``from pacore_graph import *`` beside ``from langgraph.types import
*`` loses nothing: ``ModelRetryPolicy`` is what ``RetryPolicy`` was (that name
still works here, with a ``DeprecationWarning``).

Names are imported on first use (PEP 562 ``__getattr__``): ``import
pacore_graph`` must not pay for LangGraph, pydantic and aiohttp when a caller
(the ``pacore`` command's ``--help``, a benchmark's bare loop) needs none of
them. ``from pacore_graph import X`` works for every name in ``__all__``.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

from pacore_graph.lazy import lazy_getattr

if TYPE_CHECKING:
    from pacore_graph.control.consensus import EarlyStop
    from pacore_graph.errors import (
        InvalidPromptError,
        MalformedReplyError,
        ModelCallError,
        NoContentError,
        PaCoReError,
        ResponseTooLargeError,
        RoundFailedError,
        UpstreamStatusError,
        UpstreamStreamError,
        UpstreamTimeoutError,
        UpstreamTransportError,
    )
    from pacore_graph.eval.methods import build_method_graph
    from pacore_graph.graph.builder import ainvoke_pacore, build_pacore_graph
    from pacore_graph.graph.checkpoint_types import pacore_serde
    from pacore_graph.graph.compact_step import LLMCompactor
    from pacore_graph.graph.explorer import Explorer, ExploreTask, GraphExplorer
    from pacore_graph.graph.messages_explorer import MessagesAggregator, MessagesExplorer
    from pacore_graph.graph.plans import (
        ExplorerPrompt,
        RoundInput,
        RoundPlan,
        RoundPrompts,
        SynthesisPlan,
    )
    from pacore_graph.graphs.aggagent import (
        AggregatorAgentError,
        build_aggagent_graph,
        build_aggregator_agent,
    )
    from pacore_graph.graphs.deepconf import (
        ConfidenceUnavailableError,
        ConfidenceVote,
        DeepConfOnlinePlan,
        OnlineConfidenceVote,
        StoppingExplorer,
        build_deepconf_graph,
        build_deepconf_online_graph,
    )
    from pacore_graph.graphs.majority import build_majority_graph
    from pacore_graph.graphs.pacore_confidence import (
        ConfidenceEarlyStop,
        ConfidencePlan,
        build_pacore_confidence_graph,
    )
    from pacore_graph.graphs.refine import build_refine_graph
    from pacore_graph.graphs.rsa import RSAPlan, build_rsa_graph
    from pacore_graph.graphs.single import build_single_graph
    from pacore_graph.llm.client import ChatClient, OpenAICompatClient
    from pacore_graph.llm.langchain_client import (
        LangChainChatClient,
        aclose_chat_model,
        make_chat_model,
    )
    from pacore_graph.llm.multi_client import MultiEndpointClient
    from pacore_graph.llm.sampling import PerSampleClient
    from pacore_graph.settings.config import PRESETS, ModelRetryPolicy, PaCoReConfig, SamplingParams
    from pacore_graph.settings.grammar import parse_method
    from pacore_graph.settings.per_run import SettingsError
    from pacore_graph.settings.rounds import Round
    from pacore_graph.values.aggregation import Aggregator, FirstAnswer, MajorityVote
    from pacore_graph.values.compaction import (
        AnswerCompactor,
        Compactor,
        ConclusionCompactor,
        TokenBudgetCompactor,
    )
    from pacore_graph.values.prompts import SYNTHESIS_TEMPLATE, synthesis_messages
    from pacore_graph.values.records import Completion, PaCoReResult, ToolCallRecord, Trajectory


__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "SYNTHESIS_TEMPLATE",
    "Aggregator",
    "AggregatorAgentError",
    "AnswerCompactor",
    "ChatClient",
    "Compactor",
    "Completion",
    "ConclusionCompactor",
    "ConfidenceEarlyStop",
    "ConfidencePlan",
    "ConfidenceUnavailableError",
    "ConfidenceVote",
    "DeepConfOnlinePlan",
    "EarlyStop",
    "ExploreTask",
    "Explorer",
    "ExplorerPrompt",
    "FirstAnswer",
    "GraphExplorer",
    "InvalidPromptError",
    "LLMCompactor",
    "LangChainChatClient",
    "MajorityVote",
    "MalformedReplyError",
    "MessagesAggregator",
    "MessagesExplorer",
    "ModelCallError",
    "ModelRetryPolicy",
    "MultiEndpointClient",
    "NoContentError",
    "OnlineConfidenceVote",
    "OpenAICompatClient",
    "PaCoReConfig",
    "PaCoReError",
    "PaCoReResult",
    "PerSampleClient",
    "RSAPlan",
    "ResponseTooLargeError",
    "Round",
    "RoundFailedError",
    "RoundInput",
    "RoundPlan",
    "RoundPrompts",
    "SamplingParams",
    "SettingsError",
    "StoppingExplorer",
    "SynthesisPlan",
    "TokenBudgetCompactor",
    "ToolCallRecord",
    "Trajectory",
    "UpstreamStatusError",
    "UpstreamStreamError",
    "UpstreamTimeoutError",
    "UpstreamTransportError",
    "__version__",
    "aclose_chat_model",
    "ainvoke_pacore",
    "build_aggagent_graph",
    "build_aggregator_agent",
    "build_deepconf_graph",
    "build_deepconf_online_graph",
    "build_majority_graph",
    "build_method_graph",
    "build_pacore_confidence_graph",
    "build_pacore_graph",
    "build_refine_graph",
    "build_rsa_graph",
    "build_single_graph",
    "make_chat_model",
    "pacore_serde",
    "parse_method",
    "synthesis_messages",
]


#: Where each public name lives; ``__getattr__`` imports it on first access.
_LOCATIONS: dict[str, str] = {
    # Builders: a method's compiled graph, and a run of one
    "ainvoke_pacore": "graph.builder",
    "build_pacore_graph": "graph.builder",
    "build_single_graph": "graphs.single",
    "build_majority_graph": "graphs.majority",
    "build_refine_graph": "graphs.refine",
    "build_rsa_graph": "graphs.rsa",
    "build_deepconf_graph": "graphs.deepconf",
    "build_deepconf_online_graph": "graphs.deepconf",
    "build_pacore_confidence_graph": "graphs.pacore_confidence",
    "build_aggagent_graph": "graphs.aggagent",
    "build_aggregator_agent": "graphs.aggagent",
    "build_method_graph": "eval.methods",
    "parse_method": "settings.grammar",
    # Configuration
    "PRESETS": "settings.config",
    "ModelRetryPolicy": "settings.config",
    "PaCoReConfig": "settings.config",
    "SamplingParams": "settings.config",
    "Round": "settings.rounds",
    # Parts: explorers, compactors, round plans, aggregators, early stops
    "ExploreTask": "graph.explorer",
    "Explorer": "graph.explorer",
    "GraphExplorer": "graph.explorer",
    "MessagesAggregator": "graph.messages_explorer",
    "MessagesExplorer": "graph.messages_explorer",
    "AnswerCompactor": "values.compaction",
    "Compactor": "values.compaction",
    "ConclusionCompactor": "values.compaction",
    "TokenBudgetCompactor": "values.compaction",
    "LLMCompactor": "graph.compact_step",
    "ExplorerPrompt": "graph.plans",
    "RoundInput": "graph.plans",
    "RoundPlan": "graph.plans",
    "RoundPrompts": "graph.plans",
    "SynthesisPlan": "graph.plans",
    "SYNTHESIS_TEMPLATE": "values.prompts",
    "synthesis_messages": "values.prompts",
    "Aggregator": "values.aggregation",
    "FirstAnswer": "values.aggregation",
    "MajorityVote": "values.aggregation",
    "EarlyStop": "control.consensus",
    "RSAPlan": "graphs.rsa",
    "ConfidenceVote": "graphs.deepconf",
    "DeepConfOnlinePlan": "graphs.deepconf",
    "OnlineConfidenceVote": "graphs.deepconf",
    "StoppingExplorer": "graphs.deepconf",
    "ConfidenceEarlyStop": "graphs.pacore_confidence",
    "ConfidencePlan": "graphs.pacore_confidence",
    # Clients
    "ChatClient": "llm.client",
    "OpenAICompatClient": "llm.client",
    "LangChainChatClient": "llm.langchain_client",
    "aclose_chat_model": "llm.langchain_client",
    "make_chat_model": "llm.langchain_client",
    "MultiEndpointClient": "llm.multi_client",
    "PerSampleClient": "llm.sampling",
    # Results, and checkpoints that hold them
    "Completion": "values.records",
    "PaCoReResult": "values.records",
    "ToolCallRecord": "values.records",
    "Trajectory": "values.records",
    "pacore_serde": "graph.checkpoint_types",
    # Errors
    "InvalidPromptError": "errors",
    "MalformedReplyError": "errors",
    "ModelCallError": "errors",
    "NoContentError": "errors",
    "PaCoReError": "errors",
    "ResponseTooLargeError": "errors",
    "RoundFailedError": "errors",
    "UpstreamStatusError": "errors",
    "UpstreamStreamError": "errors",
    "UpstreamTimeoutError": "errors",
    "UpstreamTransportError": "errors",
    "SettingsError": "settings.per_run",
    "ConfidenceUnavailableError": "graphs.deepconf",
    "AggregatorAgentError": "graphs.aggagent",
}

#: Old public names: (the module it stays importable from, its new name).
_DEPRECATED: dict[str, tuple[str, str]] = {
    "RetryPolicy": ("settings.config", "ModelRetryPolicy"),
}

_lazy = lazy_getattr(__name__, _LOCATIONS, globals())


def __getattr__(name: str) -> Any:
    """A public name, loaded on first use; an old name, with a warning naming the new one."""
    old = _DEPRECATED.get(name)
    if old is not None:
        module, new = old
        warnings.warn(
            f"pacore_graph.{name} is deprecated: use pacore_graph.{new}"
            f" (the old name clashes with langgraph.types.{name};"
            f" it stays importable from pacore_graph.{module})",
            DeprecationWarning,
            stacklevel=2,
        )
        return _lazy(new)
    return _lazy(name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
