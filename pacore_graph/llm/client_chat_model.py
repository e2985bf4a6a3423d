"""A LangChain chat model over this project's own :class:`ChatClient`, tool calls included.

Why: LangGraph's tool loops (``ToolNode``, the tool explorer of
:mod:`pacore_graph.graph.tool_explorer`, an aggregator agent) speak LangChain
chat models, with ``bind_tools``. ``ChatOpenAI`` is one, but it brings its own
HTTP path: the openai SDK's retries, none of our reply caps, call deadline,
session header, limiter or token accounting. :class:`ClientChatModel` is the
other way round from :class:`~pacore_graph.llm.langchain_client.LangChainChatClient`:
it lets a tool loop call the model through the run's ``OpenAICompatClient``
(or any ``ChatClient``), so the loop's calls are made, bounded, retried and
counted exactly like the explorers'.

- ``bind_tools(tools)`` sends the tools' OpenAI schemas as the request's
  ``tools`` (through :attr:`SamplingParams.extra_body`, the one way extra
  fields reach the body); the reply's ``tool_calls`` come back on the
  ``AIMessage``, parsed as LangChain's own OpenAI integration parses them
  (a call whose arguments are not JSON becomes an ``invalid_tool_call``);
- ``temperature``, ``top_p``, ``max_tokens``, ``seed`` and ``model`` (a
  round's own model: the request's model name) given at call time (or with
  ``bind``) override the model's ``params``;
- the ``AIMessage`` carries the server's reasoning in
  ``additional_kwargs["reasoning_content"]``, its usage in
  ``usage_metadata`` and its finish reason and model in
  ``response_metadata``;
- a failed call raises the client's
  :class:`~pacore_graph.errors.ModelCallError` (already retried by the client).

It is async only (``ainvoke``); a graph's nodes are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, convert_to_openai_messages
from langchain_core.messages.tool import InvalidToolCall, ToolCall
from langchain_core.output_parsers.openai_tools import make_invalid_tool_call, parse_tool_call
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field

from pacore_graph.settings.config import SamplingParams
from pacore_graph.values.records import Completion

__all__ = ["ClientChatModel", "ai_message"]

#: Call-time arguments that are sampling settings (the rest of a bind goes into the body);
#: ``model`` is a round's own model (``SamplingParams.model``: the request's model name).
_SAMPLING_KEYS = ("temperature", "top_p", "max_tokens", "model")


def _tool_calls(raw: Sequence[Mapping[str, Any]]) -> tuple[list[ToolCall], list[InvalidToolCall]]:
    calls: list[ToolCall] = []
    invalid: list[InvalidToolCall] = []
    for call in raw:
        try:
            parsed = parse_tool_call(dict(call), return_id=True)
        except OutputParserException as exc:
            invalid.append(make_invalid_tool_call(dict(call), str(exc)))
            continue
        if parsed is not None:
            calls.append(ToolCall(name=parsed["name"], args=parsed["args"], id=parsed.get("id")))
    return calls, invalid


def ai_message(completion: Completion) -> AIMessage:
    """A completion as the ``AIMessage`` a LangChain chat model returns for it."""
    calls, invalid = _tool_calls(completion.tool_calls)
    extra: dict[str, Any] = {}
    if completion.reasoning:
        extra["reasoning_content"] = completion.reasoning
    meta: dict[str, Any] = {"finish_reason": completion.finish_reason}
    if completion.model:
        meta["model_name"] = completion.model
    return AIMessage(
        content=completion.content,
        tool_calls=calls,
        invalid_tool_calls=invalid,
        additional_kwargs=extra,
        response_metadata=meta,
        usage_metadata={
            "input_tokens": completion.prompt_tokens,
            "output_tokens": completion.completion_tokens,
            "total_tokens": completion.prompt_tokens + completion.completion_tokens,
        },
    )


class ClientChatModel(BaseChatModel):
    """``BaseChatModel`` over a :class:`~pacore_graph.llm.protocols.ChatClient` (see the module).

    ``limiter`` (a :class:`~pacore_graph.control.limits.SequenceLimiter`), when
    given, is held for each call, as the explorers' batcher holds it: a tool
    loop then counts against the run's ``max_concurrency`` like any explorer.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: Any
    params: SamplingParams = Field(default_factory=SamplingParams)
    limiter: Any = None

    @property
    def _llm_type(self) -> str:
        return "pacore-chat-client"

    @property
    def model_name(self) -> str:
        """The client's model (spans name the calls after it)."""
        return str(getattr(self.client, "model", None) or "model")

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.model_name, **self.params.request_fields()}

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """This model with ``tools`` sent on every call (OpenAI's function-tool schema)."""
        bound: dict[str, Any] = {"tools": [convert_to_openai_tool(t) for t in tools], **kwargs}
        if tool_choice is not None:
            bound["tool_choice"] = tool_choice
        return self.bind(**bound)

    def _call_params(self, stop: list[str] | None, kwargs: dict[str, Any]) -> SamplingParams:
        update: dict[str, Any] = {k: kwargs.pop(k) for k in _SAMPLING_KEYS if k in kwargs}
        extra = dict(self.params.extra_body)
        for key in ("tools", "tool_choice"):
            if kwargs.get(key):
                extra[key] = kwargs.pop(key)
            kwargs.pop(key, None)
        if stop:
            extra["stop"] = list(stop)
        for key in [k for k in kwargs if k.startswith("ls_")]:
            del kwargs[key]  # LangChain's tracing hints (ls_structured_output_format, ...)
        if kwargs:
            raise TypeError(f"ClientChatModel takes no call argument {sorted(kwargs)}")
        if extra != self.params.extra_body:
            update["extra_body"] = extra
        return self.params.model_copy(update=update) if update else self.params

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        seed = kwargs.pop("seed", None)
        if seed is None:
            seed = self.params.seed
        params = self._call_params(stop, dict(kwargs))
        converted = convert_to_openai_messages(messages)
        convo = [converted] if isinstance(converted, dict) else list(converted)
        if self.limiter is not None:
            async with self.limiter.hold(1):
                (completion,) = await self.client.complete(convo, n=1, params=params, seed=seed)
        else:
            (completion,) = await self.client.complete(convo, n=1, params=params, seed=seed)
        message = ai_message(completion)
        info = {"finish_reason": completion.finish_reason}
        return ChatResult(
            generations=[ChatGeneration(message=message, generation_info=info)],
            llm_output={"model_name": completion.model or self.model_name},
        )

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError("ClientChatModel is async: call ainvoke (graph nodes do)")
