"""Deterministic token log-probabilities for the test servers, by input.

Why: confidence-based methods (DeepConf, :mod:`pacore_graph.control.confidence`)
read each token's ``top_logprobs``. Tests and benchmarks need servers whose
log-probabilities are reproducible and *chosen*: a responder says how
confident each token is (``ScriptedReply.confidence``) and the entries are
built so that DeepConf's token confidence, ``-mean(top-k logprobs)``, comes
out as exactly that number for any ``top_logprobs`` k asked.

For a token of confidence ``c`` and ``k`` alternatives the log-probabilities
are ``-c * (2j + 1) / k`` for ``j = 0..k-1`` (their mean is ``-c``); the
sampled token is the most likely one (``j = 0``). Without a request for
``top_logprobs`` the entry's own log-probability is ``-c`` and its
``top_logprobs`` is empty. A reply without a confidence gets one from a
stable hash of the token and its position, in ``[0.5, 2.5)``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

__all__ = ["Confidence", "confidence_at", "logprob_entries", "requested_top_logprobs"]

#: A reply's token confidence: one for every token, per token (the last one
#: repeats past its end), or None for the hash-derived default.
Confidence = float | Sequence[float] | None


def confidence_at(confidence: Confidence, position: int, token: str) -> float:
    """The confidence of the token at ``position`` (0-based) of a reply."""
    if confidence is None:
        digest = hashlib.blake2b(f"{position}\x1f{token}".encode(), digest_size=4).digest()
        return 0.5 + (int.from_bytes(digest, "big") % 2000) / 1000
    if isinstance(confidence, int | float):
        return float(confidence)
    if not confidence:
        raise ValueError("a per-token confidence sequence must not be empty")
    return float(confidence[min(position, len(confidence) - 1)])


def requested_top_logprobs(body: dict[str, Any]) -> int:
    """The request's ``top_logprobs`` (0 when absent or not a whole number in [0, 20])."""
    k = body.get("top_logprobs")
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= 20:
        return 0
    return k


def _entry(token: str, conf: float, k: int) -> dict[str, Any]:
    if k == 0:
        return {"token": token, "logprob": -conf, "bytes": list(token.encode()), "top_logprobs": []}
    alternatives = [
        {
            "token": token if j == 0 else f"{token}~{j}",
            "logprob": -conf * (2 * j + 1) / k,
        }
        for j in range(k)
    ]
    for alt in alternatives:
        alt["bytes"] = list(str(alt["token"]).encode())
    return {
        "token": token,
        "logprob": alternatives[0]["logprob"],
        "bytes": list(token.encode()),
        "top_logprobs": alternatives,
    }


def logprob_entries(
    tokens: Sequence[str], confidence: Confidence, k: int, *, start: int = 0
) -> list[dict[str, Any]]:
    """OpenAI ``logprobs.content`` entries for ``tokens``, the first at position ``start``."""
    return [
        _entry(token, confidence_at(confidence, start + i, token), k)
        for i, token in enumerate(tokens)
    ]
