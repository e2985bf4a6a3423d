"""A shared request: K callers, one ``n``-sample call sent by whoever holds it.

The client here answers by input (the prompt and each sample's seed); the
end-to-end path over HTTP (one POST per round, from the explore node's own
task) is in tests/graph/test_explorer.py.
"""

from __future__ import annotations

import asyncio
import traceback
from collections.abc import AsyncGenerator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.errors import ModelCallError, UpstreamStatusError
from pacore_graph.llm.sampling import PerSampleClient, SampleOutcome
from pacore_graph.llm.shared_request import SharedRequest
from pacore_graph.settings.config import SamplingParams
from pacore_graph.values.records import Completion

PARAMS = SamplingParams(max_tokens=16)
PROMPT = ({"role": "user", "content": "What is 2 + 2?"},)


def _prompt(messages: Sequence[Mapping[str, Any]]) -> str:
    return str(messages[-1]["content"])


@dataclass
class Recording(PerSampleClient):
    """Sample j of a request answers with its seed; "fail SEED" in the prompt fails that
    sample, "bug" makes the whole call raise, "slow" makes it wait until cancelled."""

    model: str = "m"
    calls: list[tuple[int, int | None, asyncio.Task[Any] | None]] = field(default_factory=list)
    cancelled: int = 0

    async def complete_each(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        params: SamplingParams,
        seed: int | None = None,
    ) -> list[SampleOutcome]:
        self.calls.append((n, seed, asyncio.current_task()))
        text = _prompt(messages)
        if "bug" in text:
            raise RuntimeError("the client has a bug")
        if "slow" in text:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        out: list[SampleOutcome] = []
        for j in range(n):
            s = None if seed is None else seed + j
            if f"fail {s}" in text:
                out.append(UpstreamStatusError(f"HTTP 400 for seed {s}", status=400))
            else:
                out.append(Completion(content=f"seed {s}", seed=s, model=self.model))
        return out


@dataclass
class Streaming(Recording):
    """Streams its samples: sample j finishes after ``delays[j]`` seconds."""

    delays: tuple[float, ...] = ()
    closed: int = 0

    async def stream_each(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        n: int,
        params: SamplingParams,
        seed: int | None = None,
    ) -> AsyncGenerator[tuple[int, SampleOutcome], None]:
        self.calls.append((n, seed, asyncio.current_task()))
        order = sorted(range(n), key=lambda j: self.delays[j])
        waited = 0.0
        try:
            for j in order:
                await asyncio.sleep(self.delays[j] - waited)
                waited = self.delays[j]
                s = None if seed is None else seed + j
                yield j, Completion(content=f"seed {s}", seed=s, model=self.model)
        finally:
            self.closed += 1


async def test_k_callers_are_one_request_sent_from_the_senders_own_task() -> None:
    client = Recording()
    request = SharedRequest(client, SequenceLimiter(8), PROMPT, PARAMS, [12, 10, 11, 13])
    results = [asyncio.ensure_future(request.result(i)) for i in range(4)]
    await request.send()
    assert [(n, seed) for n, seed, _ in client.calls] == [(4, 10)]
    assert client.calls[0][2] is asyncio.current_task()  # no task of its own in between
    # Seed order: sample j of the request is the caller whose seed is 10 + j.
    assert [r.content for r in await asyncio.gather(*results)] == [
        "seed 12",
        "seed 10",
        "seed 11",
        "seed 13",
    ]


async def test_a_request_larger_than_the_limiter_is_cut_into_chunks() -> None:
    client = Recording()
    limiter = SequenceLimiter(2)
    request = SharedRequest(client, limiter, PROMPT, PARAMS, [0, 1, 2, 3, 4])
    await request.send()
    assert sorted((n, seed) for n, seed, _ in client.calls) == [(1, 4), (2, 0), (2, 2)]
    assert [f.result().content for f in request.futures] == [f"seed {i}" for i in range(5)]
    assert limiter.in_use() == 0


async def test_a_failed_sample_fails_only_its_caller_and_names_the_sender() -> None:
    prompt = ({"role": "user", "content": "fail 21"},)
    label = "round 3's request (explorers 0-2)"
    request = SharedRequest(
        Recording(), SequenceLimiter(8), prompt, PARAMS, [20, 21, 22], label=label
    )
    await request.send()
    assert request.futures[0].result().content == "seed 20"
    assert request.futures[2].result().content == "seed 22"
    error = request.futures[1].exception()
    assert isinstance(error, ModelCallError) and "seed 21" in str(error)
    assert f"in {label}" in "".join(traceback.format_exception(error))


async def test_a_client_that_raises_fails_every_caller_with_one_note() -> None:
    prompt = ({"role": "user", "content": "bug"},)
    request = SharedRequest(Recording(), SequenceLimiter(8), prompt, PARAMS, [0, 1], label="L")
    await request.send()  # never raises: each caller gets the error
    errors = [f.exception() for f in request.futures]
    assert all(isinstance(e, RuntimeError) for e in errors)
    assert errors[0] is errors[1] and errors[0].__notes__ == ["in L"]  # type: ignore[union-attr]
    # The traceback runs from the sender down to the raise.
    names = [frame.name for frame in traceback.extract_tb(errors[0].__traceback__)]
    assert names[0] == "_fetch" and names[-1] == "complete_each"


async def test_a_request_every_caller_gave_up_is_abandoned_not_the_sender() -> None:
    client = Recording()
    prompt = ({"role": "user", "content": "slow"},)
    limiter = SequenceLimiter(8)
    request = SharedRequest(client, limiter, prompt, PARAMS, [0, 1, 2])
    callers = [asyncio.ensure_future(request.result(i)) for i in range(3)]
    sender = asyncio.ensure_future(request.send())
    await asyncio.sleep(0.05)
    assert len(client.calls) == 1 and not sender.done()
    for c in callers:
        c.cancel()
    await asyncio.wait_for(sender, 5)  # returns: the call was cut, the sender was not cancelled
    assert client.cancelled == 1 and not sender.cancelled()
    assert limiter.in_use() == 0


async def test_cancelling_the_sender_cancels_the_call_and_every_caller() -> None:
    client = Recording()
    prompt = ({"role": "user", "content": "slow"},)
    request = SharedRequest(client, SequenceLimiter(8), prompt, PARAMS, [0, 1])
    sender = asyncio.ensure_future(request.send())
    await asyncio.sleep(0.05)
    sender.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sender
    assert client.cancelled == 1
    assert all(f.cancelled() for f in request.futures)


async def test_streamed_samples_resolve_as_they_finish_and_stragglers_are_dropped() -> None:
    client = Streaming(delays=(0.0, 0.02, 30.0))
    request = SharedRequest(client, SequenceLimiter(8), PROMPT, PARAMS, [5, 6, 7], stream=True)
    sender = asyncio.ensure_future(request.send())
    first = await asyncio.wait_for(request.result(0), 5)
    second = await asyncio.wait_for(request.result(1), 5)
    assert (first.content, second.content) == ("seed 5", "seed 6")
    assert not sender.done()  # the straggler is still decoding
    request.futures[2].cancel()  # the round's gate dropped it
    await asyncio.wait_for(sender, 5)
    assert client.closed == 1 and [(n, s) for n, s, _ in client.calls] == [(3, 5)]


async def test_a_stream_needs_a_streaming_client_and_a_request_a_caller() -> None:
    with pytest.raises(TypeError, match="stream_each"):
        SharedRequest(Recording(), SequenceLimiter(8), PROMPT, PARAMS, [0], stream=True)
    with pytest.raises(ValueError, match="at least one caller"):
        SharedRequest(Recording(), SequenceLimiter(8), PROMPT, PARAMS, [])
