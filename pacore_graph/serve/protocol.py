"""The chat-completions request the server accepts, and the answers it builds.

A request field either maps to a PaCoRe setting and is honoured, or is refused
with a 400 that names it: silently ignoring ``tools`` or ``n=4`` would hand a
client something other than what it asked for. Fields sent with their neutral
value (``n: 1``, ``logprobs: false``, ``stop: null`` ...) are accepted, since
some clients always send them.

``max_tokens`` (or ``max_completion_tokens``), ``temperature``, ``top_p`` and
``seed`` apply to every explorer call of the run (explorer i of round r gets
``seed + 1000*r + i``). PaCoRe's own settings come through the ``openai``
SDK's ``extra_body``: ``rounds`` (``[8, 2]``, ``"8,2"``, or rounds with their
own settings, ``[{"k": 8, "model": "small"}, 2]``, overriding the
model name's widths) and ``compactor`` (``conclusion``, ``answer``,
``budget:N`` or a name the deployment registered; nothing a request names is
imported).

The model name picks the method (:func:`~pacore_graph.settings.grammar.parse_served_model`):
PaCoRe (``pacore-high``, ``pacore:8,2``) or another served method
(``rsa:16,4,10``, ``deepconf-online:16``, ``majority:16``, or a bare family
name for its default). ``rounds`` reshapes PaCoRe only: with another method
it is a 400, since that method's shape is its spec; the sampling fields and
``compactor`` apply to every method's calls.

Every request goes through the server's
:class:`~pacore_graph.settings.request_limits.RequestLimits`, the validator the graph
and the CLI share: the rounds and model calls it asks for (by model name
``pacore:K1,K2,..`` or ``rsa:N,K,T``, or by ``rounds``) and its ``max_tokens``
over a cap get a 400 naming the field, before any upstream call.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from pacore_graph.graph.nodes import normalize_conversation
from pacore_graph.serve.errors import APIError
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.fields import SETTINGS, serve_names
from pacore_graph.settings.grammar import MethodSpec, parse_served_model, rounds_from
from pacore_graph.settings.request_limits import RequestLimitError, RequestLimits
from pacore_graph.settings.rounds import RoundItem, rounds_from_items, widths_of
from pacore_graph.settings.validation import first_setting
from pacore_graph.values.compactor_registry import CompactorRegistry
from pacore_graph.values.records import PaCoReResult

__all__ = [
    "RunRequest",
    "completion_body",
    "completion_id",
    "parse_request",
    "usage_body",
]

#: Request fields that are run settings (the catalogue's ``serve`` rows).
_SETTINGS = serve_names()
#: The fields honoured: the run settings and the protocol's own.
_HONOURED = frozenset(
    {*_SETTINGS, "model", "messages", "max_completion_tokens", "stream", "stream_options"}
    | {"user", "n"}
)
#: Fields accepted only with these neutral values.
_NEUTRAL: dict[str, tuple[Any, ...]] = {
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "stop": (None, [], ""),
    "tools": (None, []),
    "tool_choice": (None, "none", "auto"),
    "functions": (None, []),
    "function_call": (None, "none", "auto"),
    "parallel_tool_calls": (None, True, False),
    "presence_penalty": (None, 0, 0.0),
    "frequency_penalty": (None, 0, 0.0),
    "logit_bias": (None, {}),
    "response_format": (None, {"type": "text"}),
    "metadata": (None,),
    "store": (None, False),
    "service_tier": (None, "auto", "default"),
}


@dataclass(frozen=True, slots=True)
class RunRequest:
    """A validated request: what to run and how to answer.

    ``method`` is what the model name runs. ``settings`` are the run
    settings the request gives (flat names; for PaCoRe with ``rounds`` from
    the model name when the body has none, for another method never
    ``rounds``): the method's graph runs with them as its context.
    ``rounds`` are the configured widths the run will have (a method's as
    its spec names them).
    """

    model: str
    messages: tuple[dict[str, Any], ...]
    rounds: tuple[int, ...]
    settings: Mapping[str, Any]
    stream: bool
    include_usage: bool
    method: MethodSpec


def _bad(message: str, param: str | None = None) -> APIError:
    return APIError(400, message, param=param)


def _number(body: Mapping[str, Any], key: str, kind: type) -> Any:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
        raise _bad(f"'{key}' must be {'a number' if kind is float else 'an integer'}", key)
    return value


def _rounds(value: Any) -> tuple[RoundItem, ...]:
    """Widths (``[8, 2]``, ``"8,2"``) or rounds with their own settings (``{"k": 8, ...}``)."""
    try:
        if isinstance(value, list) and any(isinstance(item, dict) for item in value):
            return rounds_from_items(value, what="'rounds'")
        return rounds_from(value, what="'rounds'")
    except ValueError as exc:
        raise _bad(str(exc), "rounds") from None


def _compactor(value: Any, compactors: CompactorRegistry) -> str:
    if not isinstance(value, str) or len(value) > 200:
        raise _bad(
            f"'compactor' must be a short string: {', '.join(compactors.names)}", "compactor"
        )
    name = value.strip()
    try:
        compactors.resolve(name)  # never imports: built-ins and registered names only
    except ValueError as exc:
        raise _bad(f"'compactor': {exc}", "compactor") from None
    return name


def _within(limits: RequestLimits, param: str, **asked: Any) -> None:
    try:
        limits.check(**asked)
    except RequestLimitError as exc:
        raise _bad(f"'{param}': {exc}", param) from None


def _method(model: str, body: Mapping[str, Any], limits: RequestLimits) -> MethodSpec:
    """The method the model name runs, within the caps (404 for a name it is not)."""
    try:
        method = parse_served_model(model)
    except ValueError as exc:
        raise APIError(404, str(exc), param="model", code="model_not_found") from None
    if method.family != "pacore" and body.get("rounds") is not None:
        raise _bad(
            f"'rounds' reshapes PaCoRe models only (pacore-*, pacore:K,..); {method.family} "
            f"takes its shape from the model name, e.g. {method.text}",
            "rounds",
        )
    if body.get("rounds") is None:
        try:
            limits.check_method(method)  # pacore:1024,1024,.. and rsa:1024,4,10 are requests too
        except RequestLimitError as exc:
            raise _bad(f"'model': {exc}", "model") from None
    return method


def parse_request(
    body: Any,
    *,
    defaults: PaCoReConfig | None = None,
    limits: RequestLimits | None = None,
    compactors: CompactorRegistry | None = None,
) -> RunRequest:
    """Validate a decoded JSON body; :class:`APIError` (400) names the first problem.

    The run settings in it are checked as the graph will check them:
    applied to ``defaults`` (the server's configuration) through
    :meth:`~pacore_graph.settings.config.PaCoReConfig.with_settings`;
    ``limits`` caps rounds, samples and ``max_tokens`` (default caps when
    None), ``compactors`` are the names a request may choose (built-ins when
    None).
    """
    defaults = defaults if defaults is not None else PaCoReConfig()
    limits = limits if limits is not None else RequestLimits()
    compactors = compactors if compactors is not None else CompactorRegistry()
    if not isinstance(body, dict):
        raise _bad("the request body must be a JSON object")
    for key, value in body.items():
        if key in _HONOURED:
            continue
        if key in _NEUTRAL:
            if value in _NEUTRAL[key]:
                continue
            raise _bad(f"'{key}' is not supported by PaCoRe serving (got {value!r})", key)
        raise _bad(f"unknown or unsupported field '{key}'", key)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad(
            "'model' is required: pacore-low, pacore-medium, pacore-high, pacore:K,.., "
            "rsa:N,K,T, deepconf:N, deepconf-online:N or majority:N",
            "model",
        )
    method = _method(model, body, limits)
    rounds = method.rounds
    items: tuple[RoundItem, ...] = rounds
    if body.get("rounds") is not None:
        items = _rounds(body["rounds"])
        rounds = widths_of(items)
        _within(limits, "rounds", rounds=items)  # a round's own max_tokens too
    n = body.get("n")
    if n is not None and n != 1:
        raise _bad("'n' must be 1: PaCoRe returns one synthesised answer per request", "n")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        raise _bad("'messages' must be a non-empty list of chat messages", "messages")
    if not all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in raw_messages):
        raise _bad("each message must be an object with a 'role'", "messages")
    try:
        messages = normalize_conversation(raw_messages)
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise _bad(f"'messages': {exc}", "messages") from None
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise _bad("'stream' must be true or false", "stream")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise _bad("'stream_options' must be an object", "stream_options")
    unknown = set(options or {}) - {"include_usage", "continuous_usage_stats"}
    if unknown or (options or {}).get("continuous_usage_stats"):
        # Usage is only known once the run ends: per-chunk usage cannot be honoured.
        refused = sorted(unknown) or ["continuous_usage_stats"]
        raise _bad(f"unsupported stream_options {refused}", "stream_options")
    include_usage = bool((options or {}).get("include_usage"))
    if options is not None and not stream:
        raise _bad("'stream_options' is only allowed with stream: true", "stream_options")

    # A method's graph has its rounds built in: a context's rounds would replace them.
    settings: dict[str, Any] = {"rounds": items} if method.family == "pacore" else {}
    for key in _SETTINGS:
        kind = SETTINGS[key].kind
        if key == "rounds" or kind not in (int, float):
            continue  # rounds: above; compactor: below
        value = _number(body, key, kind)
        if value is not None:
            settings[key] = value
    token_field = "max_completion_tokens"
    max_tokens = _number(body, token_field, int)
    if max_tokens is None:
        token_field = "max_tokens"
        max_tokens = _number(body, token_field, int)
    settings.pop("max_tokens", None)
    if max_tokens is not None:
        _within(limits, token_field, max_tokens=max_tokens)
        settings["max_tokens"] = max_tokens
    try:
        defaults.with_settings(settings)
    except ValidationError as exc:
        name, message = first_setting(exc)
        param = token_field if name == "max_tokens" else name
        raise _bad(f"'{param}': {message}", param) from None
    if body.get("compactor") is not None:
        settings["compactor"] = _compactor(body["compactor"], compactors)
    return RunRequest(
        model=model,
        messages=tuple(messages),
        rounds=rounds,
        settings=settings,
        stream=bool(stream),
        include_usage=include_usage,
        method=method,
    )


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def usage_body(result: PaCoReResult) -> dict[str, Any]:
    """Usage as effective test-time compute, with a per-round breakdown in ``rounds``."""
    per_round = []
    for r, trajectories in enumerate(result.rounds):
        per_round.append(
            {
                "round": r,
                "width": len(trajectories),
                "prompt_tokens": sum(t.prompt_tokens for t in trajectories),
                "completion_tokens": sum(t.completion_tokens for t in trajectories),
                "failures": sum(t.failed for t in trajectories),
            }
        )
    prompt = sum(r["prompt_tokens"] for r in per_round)
    completion = sum(r["completion_tokens"] for r in per_round)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "rounds": per_round,
    }


def completion_body(
    request: RunRequest, result: PaCoReResult, *, id_: str, created: int | None = None
) -> dict[str, Any]:
    """The ``chat.completion`` object for a finished run."""
    message: dict[str, Any] = {"role": "assistant", "content": result.answer}
    if result.reasoning:
        message["reasoning_content"] = result.reasoning
    return {
        "id": id_,
        "object": "chat.completion",
        "created": created if created is not None else int(time.time()),
        "model": request.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": result.final.finish_reason or "stop",
            }
        ],
        "usage": usage_body(result),
    }


def listed_models(created: int, names: Sequence[str]) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": created, "owned_by": "pacore"}
            for name in names
        ],
    }
