"""Reading one streamed ``n``-sample chat completion, choice by choice.

Why: an ``n=K`` JSON response returns its K samples together, so nothing can
be done with the first sample before the last one is finished. Over
server-sent events (``"stream": true``; vLLM streams ``n`` choices, each chunk
naming its choice by ``choices[i].index``) every choice ends on its own with
its ``finish_reason``: straggler control (:mod:`pacore_graph.control.quorum`) can
take the early samples and cancel the rest of the request by disconnecting.

:class:`ChoiceStream` turns the stream's events into one outcome per choice
as soon as that choice finishes. Token counts: vLLM's
``stream_options.continuous_usage_stats`` puts the choice's running
``completion_tokens`` on each chunk (exact); else per-delta logprobs or token
ids are counted (exact); else each text delta counts as one token, which is
how vLLM streams by default, and the count is marked ``tokens_estimated``.

A ``watch`` may stop a choice before it ends (online DeepConf: its window
confidence fell below the bar). It is called with each chunk's new
log-probability entries for that choice; when it says stop, the choice is
reported at once as a :class:`~pacore_graph.values.records.Completion` with
``finish_reason`` :data:`STOPPED` ("dropped"), the text so far and the
tokens it spent (exact: the running usage or the entries counted), and
once every choice has finished or been stopped the reader hangs up
(:attr:`ChoiceStream.abandoned`): the server sees the disconnect and stops
decoding. One HTTP request is the unit a server can cancel, so a choice is
cancelled upstream only when it is its request's last one running (online
DeepConf streams one request per trace for that reason).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pacore_graph.llm.chat_reply import no_content
from pacore_graph.llm.reply_checks import (
    indexed_choices,
    object_field,
    optional_list,
    text_field,
    token_count,
    usage_of,
)
from pacore_graph.llm.reply_limits import LOGPROB_BYTES_PER_ENTRY, too_large
from pacore_graph.llm.sampling import SampleOutcome
from pacore_graph.llm.transport import decode_event
from pacore_graph.values.records import Completion

__all__ = ["STOPPED", "ChoiceStream", "ChoiceWatch"]

#: The finish reason of a choice a watch stopped (recorded as a dropped trajectory).
STOPPED = "dropped"

#: ``watch(index, entries)``: the new log-probability entries of choice ``index``;
#: True stops that choice now.
ChoiceWatch = Callable[[int, Sequence[Any]], bool]


@dataclass(slots=True)
class _Choice:
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    text_deltas: int = 0
    tool_calls: bool = False
    usage_tokens: int | None = None
    logprobs: list[Any] | None = None
    token_ids: list[int] | None = None


class ChoiceStream:
    """Collects the chunks of one streamed request; reports each choice when it ends."""

    def __init__(
        self,
        n: int,
        *,
        model: str | None = None,
        keep_cap: int | None = None,
        watch: ChoiceWatch | None = None,
    ) -> None:
        self.n = n
        self.watch = watch
        self.stopped: set[int] = set()
        """Choices the watch stopped (also in ``finished``)."""
        self.model = model
        self.keep_cap = keep_cap
        """Most bytes of text and log-probs kept for unfinished choices (see :meth:`feed`)."""
        self.kept = 0
        self.prompt_tokens = 0
        self.finished: set[int] = set()
        self.seen: set[int] = set()
        self.done = False
        """``data: [DONE]`` arrived."""
        self._choices: dict[int, _Choice] = {}

    def feed(self, payload: bytes, *, latency_s: float) -> list[tuple[int, SampleOutcome]]:
        """One ``data:`` payload in; the choices it finished out (index, outcome).

        Raises :class:`~pacore_graph.errors.ModelCallError` for an error event, or an event that is
        not JSON or not of the chunk's shape (``kind="malformed"``; see
        :mod:`pacore_graph.llm.reply_checks`).
        """
        if payload == b"[DONE]":
            self.done = True
            return []
        event = decode_event(payload)
        model = event.get("model")
        if isinstance(model, str) and model:
            self.model = model
        choices = indexed_choices(event.get("choices") or [], self.n, allow_repeats=True)
        usage = usage_of(event)
        if usage.get("prompt_tokens") is not None:
            self.prompt_tokens = token_count(usage, "prompt_tokens")
        out: list[tuple[int, SampleOutcome]] = []
        for index, raw in choices:
            if index in self.finished:
                continue
            self.seen.add(index)
            choice = self._choices.setdefault(index, _Choice())
            seen = len(choice.logprobs) if choice.logprobs is not None else 0
            self.kept += _take_delta(choice, raw, f"choice {index}")
            if self.keep_cap is not None and self.kept > self.keep_cap:
                # Many small events add up to more than a whole answer could hold.
                self._choices.clear()
                raise too_large("the server", self.keep_cap, what="streamed answer")
            # Continuous usage is per choice only when the chunk carries one choice.
            if len(choices) == 1 and usage.get("completion_tokens") is not None:
                choice.usage_tokens = token_count(usage, "completion_tokens")
            finish = text_field(raw, "finish_reason", f"choice {index}")
            if finish is None and self.watch is not None and choice.logprobs is not None:
                fresh = choice.logprobs[seen:]
                if fresh and self.watch(index, fresh):
                    self.stopped.add(index)
                    finish = STOPPED
            if finish is not None:
                self.finished.add(index)
                out.append((index, self._outcome(index, choice, finish, latency_s)))
        return out

    @property
    def abandoned(self) -> bool:
        """Every choice finished or was stopped, and some were stopped: time to hang up."""
        return bool(self.stopped) and len(self.finished) >= self.n

    def unfinished(self) -> list[int]:
        """Choices that have not ended, in index order."""
        return [i for i in range(self.n) if i not in self.finished]

    def _outcome(self, index: int, choice: _Choice, finish: str, latency_s: float) -> SampleOutcome:
        del self._choices[index]  # its text now lives in the outcome only
        if not choice.content and not choice.tool_calls and finish != STOPPED:
            # The streamed form of ``content: null``: a failure with its cause, not "".
            return no_content(finish, "".join(choice.reasoning), streamed=True)
        if choice.usage_tokens is not None:
            tokens, estimated = choice.usage_tokens, False
        elif choice.logprobs is not None:
            tokens, estimated = len(choice.logprobs), False
        elif choice.token_ids is not None:
            tokens, estimated = len(choice.token_ids), False
        else:
            tokens, estimated = choice.text_deltas, True
        return Completion(
            content="".join(choice.content),
            reasoning="".join(choice.reasoning) if choice.reasoning else None,
            finish_reason=finish,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=tokens,
            latency_s=latency_s,
            tokens_estimated=estimated,
            logprobs={"content": choice.logprobs} if choice.logprobs is not None else None,
            token_ids=tuple(choice.token_ids) if choice.token_ids is not None else None,
            model=self.model,
        )


#: What one kept piece costs besides its text (a str object and its list slot).
_PIECE_BYTES = 64


def _take_delta(choice: _Choice, raw: Mapping[str, Any], where: str) -> int:
    """Add one chunk's delta to ``choice``; the bytes it keeps (text, pieces, log-probs)."""
    kept = 0
    delta = object_field(raw, "delta", where)
    think = text_field(delta, "reasoning", f"{where}.delta") or text_field(
        delta, "reasoning_content", f"{where}.delta"
    )
    if think:
        choice.reasoning.append(think)
        choice.text_deltas += 1
        kept += len(think) + _PIECE_BYTES
    content = text_field(delta, "content", f"{where}.delta")
    if content:
        choice.content.append(content)
        choice.text_deltas += 1
        kept += len(content) + _PIECE_BYTES
    if optional_list(delta, "tool_calls", f"{where}.delta"):
        choice.tool_calls = True
    logprobs = object_field(raw, "logprobs", where)
    entries = optional_list(logprobs, "content", f"{where}.logprobs")
    if entries is not None:
        if choice.logprobs is None:
            choice.logprobs = []
        choice.logprobs.extend(entries)
        kept += LOGPROB_BYTES_PER_ENTRY * len(entries)
    token_ids = optional_list(raw, "token_ids", where)
    if token_ids is not None:
        if choice.token_ids is None:
            choice.token_ids = []
        choice.token_ids.extend(token_ids)
        kept += 8 * len(token_ids)
    return kept
