"""The continuous-batching engine: stop strings, a failed decode step survived, log-probabilities.

The stop-string logic is pure (no model); the failure test runs the real
engine in-process on the packaged model and breaks one decode step; the
log-probability test records, on the real engine, when logits are read
relative to sampling (before it, and never for a request that did not ask).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from pacore_graph.embedded.engine import BatchEngine, _Sequence


def _seq(text: str, stop: tuple[str, ...], emitted: int = 0) -> _Sequence:
    return _Sequence(
        index=0, slot=0, sampler=None, max_new=10, stop=stop, text=text, emitted=emitted
    )


def test_text_that_may_begin_a_stop_string_is_held_back() -> None:
    assert BatchEngine._held_back(_seq("Hello wor", ("world",))) == 3
    assert BatchEngine._held_back(_seq("Hello", ("world",))) == 0
    assert BatchEngine._held_back(_seq("ab", ("bc", "abx"))) == 2
    assert BatchEngine._stop_at(_seq("Hello world!", ("world",))) == 6
    assert BatchEngine._stop_at(_seq("Hello wor", ("world",))) is None
    # A stop string split over two events is found from before the emitted point.
    assert BatchEngine._stop_at(_seq("say END now", ("END",), emitted=5)) == 4


def test_a_failed_decode_fails_its_requests_and_the_engine_goes_on() -> None:
    """In-process engine: a step that raises ends the requests in it, not the engine thread."""
    pytest.importorskip("cyllama")
    from pacore_graph.embedded import find_default_model
    from pacore_graph.embedded.engine import BatchEngine, EngineFailure, SamplingSpec

    engine = BatchEngine(
        find_default_model(), n_ctx=256, max_sequences=2, kv_tokens=512, n_threads=1
    )
    real = engine._ctx

    class BrokenContext:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def decode(self, batch: Any) -> None:
            raise RuntimeError("decode exploded")

    def ask() -> list[Any]:
        got: list[Any] = []
        done = threading.Event()

        def sink(item: Any) -> None:
            got.append(item)
            if isinstance(item, EngineFailure) or any(e.finish_reason for e in item):
                done.set()

        prompt = engine.tokenize("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
        engine.submit(prompt, 1, SamplingSpec(max_new_tokens=4, seed=1), sink)
        assert done.wait(120)
        return got

    try:
        engine._ctx = BrokenContext()
        failed = ask()
        engine._ctx = real
        answered = ask()
        stats = engine.stats()
    finally:
        engine.close()

    assert isinstance(failed[-1], EngineFailure)
    assert "decode exploded" in failed[-1].message
    assert not isinstance(answered[-1], EngineFailure)
    assert answered[-1][-1].finish_reason in ("stop", "length")
    assert stats.failed_requests == 1
    assert stats.kv_reserved == 0
    assert stats.active_sequences == 0


def test_logits_are_read_before_sampling_and_only_for_requests_that_asked() -> None:
    """In-process engine: the row is read (once per row) before its samplers run; else never."""
    pytest.importorskip("cyllama")
    from pacore_graph.embedded import find_default_model
    from pacore_graph.embedded.engine import (
        BatchEngine,
        ChoiceEvent,
        EngineFailure,
        SamplingSpec,
    )

    engine = BatchEngine(
        find_default_model(), n_ctx=256, max_sequences=2, kv_tokens=512, n_threads=1
    )
    real = engine._ctx
    log: list[tuple[str, int]] = []

    class RecordingContext:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def get_logits_ith(self, i: int) -> Any:
            log.append(("logits", i))
            return real.get_logits_ith(i)

    class RecordingSampler:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def sample(self, ctx: Any, i: int) -> int:
            log.append(("sample", i))
            return int(self.inner.sample(real, i))  # cyllama wants its own context type

    new_sequence = engine._new_sequence

    def recording_sequence(request: Any, index: int) -> _Sequence:
        seq = new_sequence(request, index)
        seq.sampler = RecordingSampler(seq.sampler)
        return seq

    engine._new_sequence = recording_sequence  # type: ignore[method-assign]

    def ask(spec: SamplingSpec) -> list[ChoiceEvent]:
        got: list[ChoiceEvent] = []
        finished: set[int] = set()
        done = threading.Event()

        def sink(item: Any) -> None:
            assert not isinstance(item, EngineFailure), item
            got.extend(item)
            finished.update(e.index for e in item if e.finish_reason is not None)
            if len(finished) == 2:
                done.set()

        prompt = engine.tokenize("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
        engine.submit(prompt, 2, spec, sink)
        assert done.wait(120)
        return got

    try:
        engine._ctx = RecordingContext()
        plain = ask(SamplingSpec(max_new_tokens=6, seed=3))
        plain_log, log[:] = list(log), []
        asked = ask(SamplingSpec(max_new_tokens=6, seed=3, top_logprobs=3))
        with pytest.raises(ValueError, match="top_logprobs must be between 0 and 20"):
            engine.submit([1, 2], 1, SamplingSpec(max_new_tokens=2, top_logprobs=21), print)
    finally:
        engine._ctx = real
        engine.close()

    assert all(kind == "sample" for kind, _ in plain_log)
    assert all(event.logprobs is None for event in plain)
    # The same samples either way: reading the logits changes nothing.
    assert [e.token_ids for e in asked] == [e.token_ids for e in plain]
    # Every sample comes after the read of its own row; the prompt's row, shared
    # by both sequences, is read once for both.
    last_read = None
    for kind, at in log:
        if kind == "logits":
            last_read = at
        else:
            assert at == last_read, log
    assert log[:3] == [("logits", log[0][1]), ("sample", log[0][1]), ("sample", log[0][1])]
    samples = sum(1 for kind, _ in log if kind == "sample")
    assert sum(1 for kind, _ in log if kind == "logits") == samples - 1
    for event in asked:
        assert event.logprobs is not None
        assert [lp.token for lp in event.logprobs] == list(event.token_ids)
        assert all(len(lp.top) == 3 for lp in event.logprobs)
