"""Token log-probabilities of the embedded model, in OpenAI's ``logprobs.content`` format.

DeepConf (``graphs/deepconf.py``) judges a trace by its tokens' top-k
log-probabilities and, online, cancels a streamed trace as soon as they say
it has lost confidence; without them it cannot run. The engine computes
them here from llama.cpp's raw logits of the position a token was sampled
from (read before the sampler runs), as vLLM's default ``raw_logprobs``
mode does: the log-softmax of the model's own distribution, before
temperature, nucleus or penalties, so a trace's confidence says what the
model believed, not how it was sampled.

The cost, paid only by sequences that asked, per row (medians on this
project's 2-core machine under a load of 4-5; one decode step of one
sequence took 31-37 ms there):

- ``LlamaContext.get_logits_ith`` copies the row into a Python list of
  ``n_vocab`` floats (49,152 for SmolLM2): ~1 ms; cyllama exposes no
  buffer, so that copy is the floor;
- the log-sum-exp over the row and its top k (k = 20): with numpy (if
  importable: it is not a dependency of the ``embedded`` extra, nor of
  ``cyllama``) 3-7 ms, in pure Python ~15 ms. Both give the same ids in the
  same order (ties broken by the lower token id, as llama.cpp's greedy
  sampler does) and log-probabilities equal to within rounding.

The sequences of one request share their prompt's last row: :class:`LogitRow`
is computed once per row and asked for each sampled token.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from operator import ge, sub
from typing import Any, Final, Protocol

__all__ = [
    "MAX_TOP_LOGPROBS",
    "MIN_LOGPROB",
    "LogitRow",
    "TokenLogprob",
    "TokenPieces",
    "content_entries",
    "log_softmax_top",
]

#: OpenAI's limit on ``top_logprobs``.
MAX_TOP_LOGPROBS: Final = 20

#: The floor of a reported log-probability (vLLM's): ``-inf`` is not JSON.
MIN_LOGPROB: Final = -9999.0

#: Below this largest logit (in absolute value), ``sum(exp(x))`` over a
#: vocabulary of up to ~2**30 entries neither overflows nor underflows to 0.
_UNSHIFTED_EXP_LIMIT: Final = 680.0

try:  # numpy is optional: not a dependency of the embedded extra (see the module docstring)
    import numpy as _np
except ImportError:  # pragma: no cover - exercised only where numpy is absent
    _np = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One sampled token's log-probability and its ``k`` most likely alternatives (ids)."""

    token: int
    logprob: float
    top: tuple[tuple[int, float], ...]


def _top_ids_pure(logits: list[float], k: int, kth: float) -> list[int]:
    """The ids of the ``k`` largest logits, given the ``k``-th largest value ``kth``.

    One C-speed pass picks the candidates (``>= kth``: usually exactly k,
    more only on ties), which are then ordered by value, lower id first.
    """
    candidates = list(compress(range(len(logits)), map(ge, logits, repeat(kth))))
    candidates.sort(key=lambda i: (-logits[i], i))
    return candidates[:k]


def _log_softmax_top_pure(logits: list[float], k: int) -> tuple[float, list[int]]:
    largest = heapq.nlargest(max(k, 1), logits)
    peak = largest[0]
    if abs(peak) < _UNSHIFTED_EXP_LIMIT:
        # No overflow (exp(709) is the largest double) nor a zero sum: skip the
        # shift by the peak, a second pass over the row (~40% of this function).
        lse = math.log(sum(map(math.exp, logits)))
    else:
        lse = peak + math.log(sum(map(math.exp, map(sub, logits, repeat(peak)))))
    return lse, _top_ids_pure(logits, k, largest[k - 1]) if k else []


def _log_softmax_top_numpy(logits: list[float], k: int) -> tuple[float, list[int]]:
    assert _np is not None
    row = _np.fromiter(logits, dtype=_np.float64, count=len(logits))
    peak = float(row.max())
    lse = peak + math.log(float(_np.exp(row - peak).sum()))
    if not k:
        return lse, []
    kth = _np.partition(row, len(row) - k)[len(row) - k]
    candidates = _np.flatnonzero(row >= kth)
    order = _np.lexsort((candidates, -row[candidates]))  # by value descending, then id
    return lse, [int(i) for i in candidates[order[:k]]]


def log_softmax_top(
    logits: Sequence[float], k: int, *, use_numpy: bool | None = None
) -> tuple[float, list[int]]:
    """The row's log-sum-exp and the ids of its ``k`` largest entries, largest first.

    ``use_numpy`` forces one implementation (the tests compare them); by
    default numpy is used when it is importable.
    """
    if not 0 <= k <= len(logits):
        raise ValueError(f"k must be between 0 and {len(logits)}, got {k}")
    values = logits if isinstance(logits, list) else list(logits)
    numpy = _np is not None if use_numpy is None else use_numpy
    if numpy:
        if _np is None:
            raise RuntimeError("numpy is not installed")
        return _log_softmax_top_numpy(values, k)
    return _log_softmax_top_pure(values, k)


class LogitRow:
    """The log-softmax of one output row, computed once for every sequence sampling from it."""

    __slots__ = ("_logits", "_lse", "_top")

    def __init__(self, logits: Sequence[float], k: int) -> None:
        self._logits = logits if isinstance(logits, list) else list(logits)
        self._lse, ids = log_softmax_top(self._logits, k)
        self._top = tuple((i, self._logprob(i)) for i in ids)

    def _logprob(self, token: int) -> float:
        return max(MIN_LOGPROB, self._logits[token] - self._lse)

    def entry(self, token: int) -> TokenLogprob:
        """The sampled ``token``'s log-probability (in the top list or not) and the top list."""
        return TokenLogprob(token, self._logprob(token), self._top)


class _Vocab(Protocol):
    """What :class:`TokenPieces` reads of cyllama's ``LlamaVocab``."""

    @property
    def vocab_type(self) -> int: ...

    def get_text(self, token: int) -> str: ...

    def is_control(self, token: int) -> bool: ...

    def token_to_piece(self, token: int, lstrip: int = 0, special: bool = False) -> str: ...


#: llama.cpp's ``LLAMA_VOCAB_TYPE_BPE``: GPT-2 style byte-level BPE (SmolLM2's).
_VOCAB_TYPE_BPE: Final = 2


def _gpt2_byte_decoder() -> dict[str, int]:
    """GPT-2's ``bytes_to_unicode`` inverted: the character standing for each byte in BPE text."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, chars, strict=True)}


class TokenPieces:
    """The text and exact bytes of token ids, as OpenAI's ``token`` and ``bytes`` (cached).

    cyllama's ``token_to_piece`` decodes with ``errors="replace"``, so a token
    holding part of a multi-byte character (314 of SmolLM2's) loses its
    bytes there. For a byte-level BPE vocabulary the bytes are recovered
    exactly from the token's vocabulary text (GPT-2's byte-to-character
    table, checked against ``token_to_piece`` over SmolLM2's whole
    vocabulary); ``bytes`` then joins to the completion's UTF-8 as OpenAI
    promises, and ``token`` is their decoding (U+FFFD for a partial
    character). Control tokens (``<|im_end|>``) are their own text; other
    vocabulary types fall back to ``token_to_piece``'s text.
    """

    def __init__(self, vocab: _Vocab) -> None:
        self._vocab = vocab
        self._decoder = _gpt2_byte_decoder() if int(vocab.vocab_type) == _VOCAB_TYPE_BPE else None
        self._cache: dict[int, tuple[str, list[int]]] = {}

    def _bytes(self, token: int) -> bytes:
        if self._decoder is not None and not self._vocab.is_control(token):
            text = str(self._vocab.get_text(token))
            if text and all(c in self._decoder for c in text):
                return bytes(self._decoder[c] for c in text)
        return str(self._vocab.token_to_piece(token, special=True)).encode()

    def piece(self, token: int) -> tuple[str, list[int]]:
        """``(token text, its UTF-8 bytes as ints)``."""
        cached = self._cache.get(token)
        if cached is None:
            raw = self._bytes(token)
            cached = self._cache[token] = (raw.decode("utf-8", errors="replace"), list(raw))
        return cached


def _alternative(pieces: TokenPieces, token: int, logprob: float) -> dict[str, Any]:
    text, raw = pieces.piece(token)
    return {"token": text, "logprob": logprob, "bytes": list(raw)}


def content_entries(logprobs: Sequence[TokenLogprob], pieces: TokenPieces) -> list[dict[str, Any]]:
    """OpenAI's ``choices[i].logprobs.content`` entries of these tokens, in order."""
    entries = []
    for item in logprobs:
        entry = _alternative(pieces, item.token, item.logprob)
        entry["top_logprobs"] = [_alternative(pieces, t, lp) for t, lp in item.top]
        entries.append(entry)
    return entries
