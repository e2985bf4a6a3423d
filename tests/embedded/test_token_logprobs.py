"""Log-softmax, top-k and token bytes of the embedded model's log-probabilities.

The arithmetic is checked on made-up rows against a plain reference (both
implementations: numpy's and the pure-Python fallback used where numpy is
not installed); the byte recovery against SmolLM2's real vocabulary.
"""

from __future__ import annotations

import math
import random
from typing import Any, ClassVar

import pytest
from embedded_support import require_embedded

from pacore_graph.embedded.token_logprobs import (
    MIN_LOGPROB,
    LogitRow,
    TokenLogprob,
    TokenPieces,
    content_entries,
    log_softmax_top,
)


def _has_numpy() -> bool:
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(params=[False, True], ids=["pure", "numpy"])
def use_numpy(request: pytest.FixtureRequest) -> bool:
    if request.param and not _has_numpy():
        pytest.skip("numpy is not installed")
    return bool(request.param)


def _reference(logits: list[float], k: int) -> tuple[float, list[int]]:
    lse = math.log(math.fsum(math.exp(x) for x in logits))
    order = sorted(range(len(logits)), key=lambda i: (-logits[i], i))
    return lse, order[:k]


@pytest.mark.parametrize("k", [0, 1, 5, 20])
def test_log_sum_exp_and_top_k_match_a_plain_reference(use_numpy: bool, k: int) -> None:
    rng = random.Random(k)
    logits = [rng.gauss(0.0, 4.0) for _ in range(3000)]
    lse, top = log_softmax_top(logits, k, use_numpy=use_numpy)
    want_lse, want_top = _reference(logits, k)
    assert lse == pytest.approx(want_lse, abs=1e-9)
    assert top == want_top


def test_ties_are_broken_by_the_lower_id_as_llama_cpp_greedy_does(use_numpy: bool) -> None:
    """Equal logits at the cut and inside the top: the same ids, whichever implementation."""
    logits = [0.0, 3.0, 1.0, 3.0, 1.0, 1.0, -2.0]
    _, top = log_softmax_top(logits, 4, use_numpy=use_numpy)
    assert top == [1, 3, 2, 4]
    _, flat = log_softmax_top([0.5] * 6, 3, use_numpy=use_numpy)
    assert flat == [0, 1, 2]


def test_large_logits_neither_overflow_nor_underflow(use_numpy: bool) -> None:
    lse, top = log_softmax_top([1000.0, 999.0, -1000.0], 2, use_numpy=use_numpy)
    assert lse == pytest.approx(1000.0 + math.log(1 + math.exp(-1)))
    assert top == [0, 1]
    lse, _ = log_softmax_top([-1000.0, -1001.0], 0, use_numpy=use_numpy)  # exp(x) == 0.0
    assert lse == pytest.approx(-1000.0 + math.log(1 + math.exp(-1)))


def test_k_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="k must be between 0 and 3"):
        log_softmax_top([0.0, 1.0, 2.0], 4)


def test_a_row_gives_each_sampled_token_its_own_logprob_and_the_shared_top() -> None:
    logits = [2.0, 1.0, 0.0, -1.0, -30000.0]
    row = LogitRow(logits, 2)
    lse = math.log(math.fsum(math.exp(x) for x in logits))
    first = row.entry(0)
    outside = row.entry(3)  # sampled though not among the top 2 (temperature, top-p)
    assert [t for t, _ in first.top] == [0, 1]
    assert first.logprob == first.top[0][1] == pytest.approx(2.0 - lse)
    assert outside.logprob == pytest.approx(-1.0 - lse)
    assert outside.top == first.top
    assert sum(math.exp(lp) for _, lp in first.top) <= 1.0
    assert row.entry(4).logprob == MIN_LOGPROB  # floored: -inf is not JSON


class _FakeVocab:
    """Byte-level BPE text as GPT-2 writes it: 'Ġ' is a space, 'Ã©' the bytes of 'é'."""

    vocab_type = 2
    texts: ClassVar[dict[int, str]] = {0: "<|im_end|>", 1: "Ġhello", 2: "Ã©", 3: "ðŁ", 4: "\u2603"}

    def get_text(self, token: int) -> str:
        return self.texts[token]

    def is_control(self, token: int) -> bool:
        return token == 0

    def token_to_piece(self, token: int, lstrip: int = 0, special: bool = False) -> str:
        return {0: "<|im_end|>", 4: "snowman"}.get(token, "?")


def test_pieces_recover_the_exact_bytes_of_byte_level_tokens() -> None:
    pieces = TokenPieces(_FakeVocab())
    assert pieces.piece(1) == (" hello", list(b" hello"))
    assert pieces.piece(2) == ("é", list("é".encode()))
    # Half of an emoji: the token text is a replacement character, the bytes are exact.
    assert pieces.piece(3) == ("\ufffd", [0xF0, 0x9F])
    assert pieces.piece(0) == ("<|im_end|>", list(b"<|im_end|>"))  # control: its own text
    assert pieces.piece(4) == ("snowman", list(b"snowman"))  # not in the byte table


def test_content_entries_are_openai_shaped() -> None:
    pieces = TokenPieces(_FakeVocab())
    entries = content_entries(
        [TokenLogprob(2, -0.5, ((1, -0.25), (2, -0.5))), TokenLogprob(1, -0.1, ())], pieces
    )
    assert entries == [
        {
            "token": "é",
            "logprob": -0.5,
            "bytes": [0xC3, 0xA9],
            "top_logprobs": [
                {"token": " hello", "logprob": -0.25, "bytes": list(b" hello")},
                {"token": "é", "logprob": -0.5, "bytes": [0xC3, 0xA9]},
            ],
        },
        {"token": " hello", "logprob": -0.1, "bytes": list(b" hello"), "top_logprobs": []},
    ]
    entries[0]["bytes"].append(0)  # a caller's edit does not reach the cache
    assert pieces.piece(2)[1] == [0xC3, 0xA9]


@pytest.mark.embedded
def test_pieces_agree_with_llama_cpp_on_the_whole_smollm2_vocabulary() -> None:
    """Every token's recovered bytes decode to llama.cpp's own piece (special tokens to theirs)."""
    require_embedded()
    from cyllama.llama import llama_cpp

    from pacore_graph.embedded import find_default_model

    llama_cpp.disable_logging()
    llama_cpp.ggml_backend_load_all()
    params = llama_cpp.LlamaModelParams()
    params.n_gpu_layers = 0  # (vocab_only aborts in cyllama 0.2.18; the weights are mmapped)
    model = llama_cpp.LlamaModel(str(find_default_model()), params)
    vocab: Any = model.get_vocab()
    pieces = TokenPieces(vocab)
    partial = 0
    for token in range(vocab.n_vocab):
        text, raw = pieces.piece(token)
        assert text == vocab.token_to_piece(token, special=True), token
        assert bytes(raw).decode("utf-8", errors="replace") == text
        partial += "\ufffd" in text
    assert partial > 0, "SmolLM2 has tokens holding part of a character"
