"""An in-process :class:`~pacore_graph.llm.client.ChatClient` that answers by input.

Like pydantic-ai's ``FunctionModel``: a function of the request decides the
reply, so K parallel explorers get answers that do not depend on scheduling.
Unit tests use it where HTTP adds nothing; HTTP behaviour is tested against
:class:`~pacore_graph.testing.scripted_server.ScriptedServer`.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pacore_graph.errors import UpstreamStatusError
from pacore_graph.llm.sampling import PerSampleClient, SampleOutcome
from pacore_graph.settings.config import SamplingParams
from pacore_graph.values.records import Completion

__all__ = ["FakeCall", "FakeChatClient", "FakeReply"]

_STATUS = re.compile(r"\bHTTP (\d{3})\b")


def _status(error: str) -> int:
    """The status an error text names (``HTTP 429 ...``), else 500: the fake fails by input."""
    found = _STATUS.search(error)
    return int(found.group(1)) if found else 500


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeCall:
    """One sample asked of the fake: the conversation and the sample's index in its request."""

    messages: tuple[Mapping[str, Any], ...]
    sample_index: int
    n: int
    seed: int | None
    params: SamplingParams

    @property
    def last_user(self) -> str:
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return str(m.get("content", ""))
        return ""


@dataclass(frozen=True, slots=True, kw_only=True)
class FakeReply:
    content: str
    reasoning: str | None = None
    finish_reason: str = "stop"
    completion_tokens: int | None = None
    error: str | None = None


def _default_reply(call: FakeCall) -> FakeReply:
    digest = hashlib.sha256(f"{call.last_user}|{call.sample_index}".encode()).hexdigest()[:6]
    return FakeReply(content=f"<think>thinking {digest}</think>answer {digest}")


@dataclass
class FakeChatClient(PerSampleClient):
    """Replies come from ``reply(call)``; a reply with ``error`` fails that sample only.

    ``complete`` (from :class:`~pacore_graph.llm.sampling.PerSampleClient`)
    then raises that sample's ModelCallError, as a real client does.
    """

    reply: Callable[[FakeCall], FakeReply | str] = _default_reply
    model: str = "fake"
    latency_s: float = 0.0
    calls: list[FakeCall] = field(default_factory=list)
    requests: int = 0

    async def complete_each(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        params: SamplingParams,
        seed: int | None = None,
    ) -> list[SampleOutcome]:
        self.requests += 1
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        frozen = tuple(dict(m) for m in messages)
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in frozen)
        out: list[SampleOutcome] = []
        for i in range(n):
            call = FakeCall(messages=frozen, sample_index=i, n=n, seed=seed, params=params)
            self.calls.append(call)
            reply = self.reply(call)
            if isinstance(reply, str):
                reply = FakeReply(content=reply)
            if reply.error is not None:
                out.append(
                    UpstreamStatusError(reply.error, status=_status(reply.error), retryable=True)
                )
                continue
            tokens = reply.completion_tokens
            if tokens is None:
                tokens = len(reply.content.split()) + len((reply.reasoning or "").split())
            out.append(
                Completion(
                    content=reply.content,
                    reasoning=reply.reasoning,
                    finish_reason=reply.finish_reason,
                    prompt_tokens=prompt_tokens,
                    completion_tokens=tokens,
                    latency_s=self.latency_s,
                    model=self.model,
                )
            )
        return out
