"""The continuous-batching engine: stop strings, and a failed decode step survived.

The stop-string logic is pure (no model); the failure test runs the real
engine in-process on the packaged model and breaks one decode step.
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
