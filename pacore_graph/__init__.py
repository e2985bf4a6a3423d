"""pacore-graph: PaCoRe (Parallel Coordinated Reasoning) as a LangGraph agent graph.

Each round fans out K parallel explorer trajectories with ``Send``, compacts
each to its conclusion, and feeds those messages to the next round; a final
K=1 round gives the answer. Start with :func:`build_pacore_graph`.
"""

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
from pacore_graph.explorer import ChatExplorer, Explorer, ExploreTask, GraphExplorer
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
