"""The one builder of a chat-completions request body.

Every path (JSON, one streamed sample, a streamed ``n``-sample request, and
the one-sample requests a server that ignores ``n`` gets) sends the same
fields built the same way, so a sampling setting cannot reach one path and
miss another.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pacore_graph.llm.sampling import check_encodable
from pacore_graph.settings.config import SamplingParams

__all__ = ["chat_body", "encode", "single_sample"]


def chat_body(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    params: SamplingParams,
    *,
    n: int = 1,
    seed: int | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    """The request body; refuses a prompt that is not valid Unicode before anything is sent."""
    body: dict[str, Any] = {"model": model, "messages": list(messages), **params.request_fields()}
    check_encodable(body["messages"])
    if stream:
        body["stream"] = True
    if n > 1:
        body["n"] = n
    if seed is not None:
        body["seed"] = seed
    return body


def single_sample(body: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    """``body`` as a one-sample JSON request with its own ``seed`` (no ``n``, no streaming)."""
    one = {k: v for k, v in body.items() if k not in ("n", "seed", "stream", "stream_options")}
    if seed is not None:
        one["seed"] = seed
    return one


def encode(body: Mapping[str, Any]) -> bytes:
    """A request body as sent: encoded once, so the reply cap can count its size."""
    return json.dumps(body).encode("utf-8")
