"""Old import path of :mod:`pacore_graph.langchain_client` (kept so existing code runs).

The module was renamed because it holds the LangChain chat client, not data
models; import from ``pacore_graph.langchain_client`` in new code.
"""

from __future__ import annotations

from pacore_graph.langchain_client import (
    LangChainChatClient,
    ReasoningChatOpenAI,
    aclose_chat_model,
    make_chat_model,
)

__all__ = ["LangChainChatClient", "ReasoningChatOpenAI", "aclose_chat_model", "make_chat_model"]
