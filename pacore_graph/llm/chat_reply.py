"""Reading a chat.completion answer: one outcome per choice, usage shared out honestly.

Why a module of its own: the direct client, the LangChain client and the
streamed paths all need the same answer to "what did each sample cost" and
"is a choice with no content a success" (it is not: it is a
:class:`~pacore_graph.errors.NoContentError` with its cause).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pacore_graph.errors import MalformedReplyError, NoContentError
from pacore_graph.llm.reply_checks import (
    indexed_choices,
    malformed,
    object_field,
    optional_list,
    text_field,
    token_count,
    usage_of,
)
from pacore_graph.llm.sampling import SampleOutcome, first_failure
from pacore_graph.values.records import Completion

__all__ = ["apportion", "no_content", "parse_chat_choices", "parse_chat_response"]


def apportion(total: int, weights: Sequence[int]) -> list[int]:
    """Split ``total`` over ``weights`` proportionally, as integers summing to ``total``.

    Servers report usage for a whole ``n``-sample request; each sample's share
    is estimated by its text length (largest-remainder rounding keeps the sum,
    and so effective TTC, exact). Every sample cost at least one token (its
    finish token, if nothing else), so when the total allows it each share is
    at least 1: a short answer beside a long one is never counted as free.
    """
    if not weights:
        return []
    if total >= len(weights):
        rest = _proportional(total - len(weights), weights)
        return [1 + r for r in rest]
    return _proportional(total, weights)


def _proportional(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainder; even when all are 0)."""
    wsum = sum(weights)
    if wsum <= 0:
        base, extra = divmod(total, len(weights))
        return [base + (1 if i < extra else 0) for i in range(len(weights))]
    raw = [total * w / wsum for w in weights]
    shares = [int(x) for x in raw]
    order = sorted(range(len(raw)), key=lambda i: raw[i] - shares[i], reverse=True)
    for i in order[: total - sum(shares)]:
        shares[i] += 1
    return shares


def _choice_token_count(choice: Mapping[str, Any], where: str) -> int | None:
    """Exact completion tokens of one choice when the server says (logprobs, token ids)."""
    token_ids = optional_list(choice, "token_ids", where)
    if token_ids is not None:
        return len(token_ids)
    logprobs = object_field(choice, "logprobs", where)
    entries = optional_list(logprobs, "content", f"{where}.logprobs")
    return len(entries) if entries is not None else None


def no_content(
    finish: str | None, reasoning: str | None, *, streamed: bool = False
) -> NoContentError:
    """A choice with no content, with its cause (finish reason, reasoning spent)."""
    why = f"finish_reason={finish!r}"
    if reasoning:
        why += f", {len(reasoning)} characters of reasoning and no answer"
    form = "streamed none" if streamed else "content: null"
    return NoContentError(f"server returned no content ({form}, {why})")


def _answer_error(data: Mapping[str, Any]) -> MalformedReplyError:
    """A 200 answer without choices: the server's own error object, on one line."""
    error = data.get("error")
    detail = error.get("message") if isinstance(error, Mapping) else error
    text = json.dumps(detail if detail is not None else data, default=str)[:300]
    return malformed(f"no choices in the answer: {text}")


def parse_chat_choices(
    data: Mapping[str, Any], *, latency_s: float, model: str | None = None, n: int | None = None
) -> list[SampleOutcome]:
    """One outcome per choice of a chat.completion JSON object.

    A choice's tool calls are kept as the server sent them
    (``Completion.tool_calls``), for a tool loop over this client. A choice
    whose ``content`` is null (and that made no tool call) is a
    failed sample with its cause, not an empty success: a reasoning model cut
    by ``max_tokens`` while still thinking answers like that. An answer of
    the wrong shape (see :mod:`pacore_graph.llm.reply_checks`; ``n`` is how many
    samples were asked for, and more choices than that are refused) raises
    one :class:`~pacore_graph.errors.MalformedReplyError`.
    """
    raw_choices = data.get("choices")
    if raw_choices is None or raw_choices == []:
        raise _answer_error(data)
    choices = indexed_choices(raw_choices, n)
    usage = usage_of(data)
    prompt_tokens = token_count(usage, "prompt_tokens")
    total_completion = token_count(usage, "completion_tokens", samples=len(choices))
    answer_model = data.get("model")
    if not isinstance(answer_model, str) or not answer_model:
        answer_model = model
    parsed: list[tuple[Mapping[str, Any], str | None, str | None, str | None, list[Any] | None]]
    parsed = []
    for index, choice in choices:
        where = f"choice {index}"
        message = object_field(choice, "message", where)
        content = text_field(message, "content", f"{where}.message")
        reasoning = text_field(message, "reasoning", f"{where}.message")
        if reasoning is None:
            reasoning = text_field(message, "reasoning_content", f"{where}.message")
        tool_calls = optional_list(message, "tool_calls", f"{where}.message")
        finish = text_field(choice, "finish_reason", where)
        if content is None and not tool_calls:
            parsed.append((choice, None, reasoning, finish, None))
            continue
        parsed.append((choice, content or "", reasoning, finish, tool_calls))
    exact = [_choice_token_count(c, f"choice {i}") for i, c in choices]
    if len(choices) == 1:
        shares, estimated = [total_completion], False
    elif all(e is not None for e in exact):
        shares, estimated = [int(e or 0) for e in exact], False
    else:
        weights = [len(c or "") + len(r or "") for _, c, r, _, _ in parsed]
        shares, estimated = apportion(total_completion, weights), True
    out: list[SampleOutcome] = []
    for (choice, content, reasoning, finish, calls), share in zip(parsed, shares, strict=True):
        if content is None:
            out.append(no_content(finish, reasoning))
            continue
        token_ids = choice.get("token_ids")
        logprobs = choice.get("logprobs")
        out.append(
            Completion(
                content=content,
                reasoning=reasoning,
                finish_reason=finish,
                prompt_tokens=prompt_tokens,
                completion_tokens=share,
                latency_s=latency_s,
                tokens_estimated=estimated,
                logprobs=logprobs if isinstance(logprobs, Mapping) else None,
                token_ids=tuple(token_ids) if isinstance(token_ids, list) else None,
                model=answer_model,
                tool_calls=_tool_calls(calls, f"choice {choice.get('index')}"),
            )
        )
    return out


def _tool_calls(calls: list[Any] | None, where: str) -> tuple[Mapping[str, Any], ...]:
    """A choice's tool calls as sent, each checked to be an object (their arguments are text)."""
    if not calls:
        return ()
    for i, call in enumerate(calls):
        if not isinstance(call, Mapping):
            raise malformed(f"{where}.message.tool_calls[{i}] is not an object")
    return tuple(calls)


def parse_chat_response(
    data: Mapping[str, Any], *, latency_s: float, model: str | None = None
) -> list[Completion]:
    """Turn a chat.completion JSON object into one :class:`Completion` per choice.

    Raises :class:`~pacore_graph.errors.ModelCallError` when a choice failed (see
    :func:`parse_chat_choices`).
    """
    return first_failure(parse_chat_choices(data, latency_s=latency_s, model=model))
