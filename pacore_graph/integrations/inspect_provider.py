"""Inspect AI's model provider ``pacore``: any of our methods as the model of any Inspect task.

``inspect eval TASK --model pacore/METHOD/NAME --model-base-url URL`` runs
METHOD (``pacore-low``, ``pacore-high``, ``pacore:8,2``, ``rsa:N,K,T``,
``deepconf-online:N``, ``majority:N``, ``single`` ...: every name ``pacore
serve`` or ``pacore eval --methods`` takes,
:func:`~pacore_graph.integrations.method_runner.parse_method_name`) against
the OpenAI-compatible server at URL serving the model NAME (which may hold
slashes: ``pacore/pacore-high/Qwen/Qwen3-8B``). The served name may instead
be ``-M upstream=NAME`` or ``PACORE_MODEL``; not ``-M model=NAME``, which
Inspect's ``get_model(model=...)`` keeps for itself (it fails with "got
multiple values for keyword argument 'model'"). Inspect finds the provider
through the ``inspect_ai`` entry point this package declares (installing
``pacore-graph[inspect]`` is enough); this module registers it with
``@modelapi(name="pacore")`` when Inspect loads it.

What a ``generate`` call is, in Inspect's terms:

- the answer is the method's answer (the assistant message's text; its
  reasoning, when the final trajectory has some, a reasoning block);
- ``usage.output_tokens`` is the run's effective test-time compute (all
  trajectories' completion tokens over all rounds), ``input_tokens`` the
  prompt tokens of all its calls: what the method spent, not one call's;
- the run's record (:func:`~pacore_graph.integrations.method_runner.run_record`:
  widths, per-trajectory answers and tokens) is the output's
  ``metadata["pacore"]`` and is appended to the sample's
  ``metadata["pacore"]`` list, one entry per call (a multi-turn task has
  several);
- Inspect's ``GenerateConfig`` maps onto the run's settings: ``temperature``,
  ``top_p``, ``max_tokens`` and ``seed`` apply to every explorer call; what a
  method cannot honour (tools, ``stop_seqs``, ``num_choices`` > 1,
  ``logprobs``) is refused with an error naming it rather than ignored;
- ``-M`` arguments: ``upstream`` (the served model's name, when the model
  string does not give it) and any of pacore's run options by name (``-M
  compactor=answer -M max_concurrency=256 -M rsa_final=aggregate``).

Only ``inspect_ai`` is imported here at load time; the graph and client load
when Inspect creates the model, so an Inspect run that never names
``pacore/...`` pays nothing for the entry point.
"""

from __future__ import annotations

import contextlib
from typing import Any

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageTool,
    ContentReasoning,
    ContentText,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    modelapi,
)
from inspect_ai.tool import ToolChoice, ToolInfo

from pacore_graph.integrations.method_runner import MethodRunner, run_record

__all__ = ["PaCoReModelAPI", "chat_messages", "run_context"]

#: Environment variables Inspect may take the API key from (as the CLI reads it).
API_KEY_VARS = ["PACORE_API_KEY", "OPENAI_API_KEY"]


def chat_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Inspect's messages as the OpenAI-style dicts a method runs on (text only).

    A tool result has no place in a method's prompt (its explorers do not
    call the task's tools): ValueError rather than a silently shortened
    conversation.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, ChatMessageTool):
            raise ValueError("pacore: tool results cannot be sent to a test-time method")
        out.append({"role": message.role, "content": message.text})
    return out


def run_context(config: GenerateConfig) -> dict[str, Any]:
    """The run settings an Inspect ``GenerateConfig`` asks for; ValueError for what we refuse."""
    if config.stop_seqs:
        raise ValueError("pacore: stop_seqs is not supported (a method writes whole answers)")
    if config.num_choices is not None and config.num_choices > 1:
        raise ValueError("pacore: num_choices > 1 is not supported (one answer per run)")
    if config.logprobs:
        raise ValueError("pacore: logprobs of a method's answer are not available")
    context: dict[str, Any] = {}
    for name in ("temperature", "top_p", "max_tokens", "seed"):
        value = getattr(config, name)
        if value is not None:
            context[name] = value
    return context


def _record_on_sample(record: dict[str, Any]) -> None:
    """Append ``record`` to the running sample's ``metadata["pacore"]`` (no sample: nothing).

    Inspect exposes the running sample's state only from a private module;
    if a version moves it, the record still is in the output's metadata.
    """
    with contextlib.suppress(ImportError):
        from inspect_ai.solver._task_state import sample_state

        state = sample_state()
        if state is not None:
            state.metadata.setdefault("pacore", []).append(record)


@modelapi(name="pacore")
class PaCoReModelAPI(ModelAPI):
    """``pacore/METHOD[/NAME]``: the method runs once per ``generate`` call (module docstring)."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),  # noqa: B008 - Inspect's own signature
        **model_args: Any,
    ) -> None:
        super().__init__(
            model_name=model_name,
            base_url=base_url,
            api_key=api_key,
            api_key_vars=API_KEY_VARS,
            config=config,
        )
        method, _, served = model_name.partition("/")
        upstream = served or model_args.pop("upstream", None)
        self.runner = MethodRunner(
            method,
            base_url=base_url,
            model=str(upstream) if upstream is not None else None,
            api_key=self.api_key,
            settings=model_args,
        )

    async def generate(
        self,
        input: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        if tools:
            raise ValueError(
                f"pacore/{self.model_name}: tools are not supported (the method's explorers "
                "are plain chat calls); use it on tasks without tools"
            )
        messages = chat_messages(input)
        result = await self.runner.run(messages, run_context(config))
        record = run_record(result, self.runner.method, messages)
        _record_on_sample(record)
        content: list[ContentReasoning | ContentText] = []
        if result.reasoning:
            content.append(ContentReasoning(reasoning=result.reasoning))
        content.append(ContentText(text=result.answer))
        prompt = record["prompt_tokens"]
        output = ModelOutput.from_message(
            ChatMessageAssistant(content=list(content), model=self.model_name, source="generate"),
            stop_reason="max_tokens" if result.final.finish_reason == "length" else "stop",
        )
        output.model = self.model_name
        output.usage = ModelUsage(
            input_tokens=prompt,
            output_tokens=result.effective_ttc,
            total_tokens=prompt + result.effective_ttc,
        )
        output.time = result.wall_s
        output.metadata = {"pacore": record}
        return output

    async def aclose(self) -> None:
        await self.runner.aclose()

    def max_tokens(self) -> int | None:
        """No default cap: the run's settings (``PACORE_MAX_TOKENS``, ``-M``) decide."""
        return None
