"""DeepConf's trace confidence: from token log-probabilities to keep, stop and vote.

DeepConf (Fu et al., "Deep Think with Confidence", public code
facebookresearch/deepconf at commit ``675529d172ef6d240aa1f21cb60940d427cc1ea6``)
judges a reasoning trace by how sure the model was while writing it:

- **token confidence** (``deepconf/utils.py: compute_confidence``): minus the
  mean of the token's top-k log-probabilities, rounded to 3 decimals (k = 20
  in its code: ``logprobs=20``). Over the OpenAI API those are the entry's
  ``top_logprobs``; an entry without them falls back to its own ``logprob``.
- **group confidence** (``compute_least_grouped``): the mean over a sliding
  window of ``window`` tokens (2,048 in the paper and code), each rounded to
  3 decimals; a trace shorter than the window is one group, its mean.
- **lowest group confidence** (``process_output``'s ``min_conf``): the
  trace's weakest stretch, the number every decision below uses.
- **the top share** (``filter_top_confidence``): keep the traces whose score
  is at or above the ``(1 - share)`` percentile of the scores (numpy's
  linear percentile, reproduced by :func:`percentile`).
- **the online threshold** (``wrapper.py: _deepthink_online``): the
  ``100 - confidence_percentile`` percentile of the warm-up traces' lowest
  group confidences: the same rule, with ``share = confidence_percentile /
  100``; a later trace stops as soon as its *full* window's mean falls below
  it (``processors.py: ConfPerReqLogitsProcessor`` checks only once the window
  holds ``window`` tokens), which :class:`WindowConfidence` follows.
- **the vote** (``weighted_majority_vote``): each kept trace's answer weighs
  its confidence; the heaviest answer wins (ties: the first answer seen).

Everything here is pure arithmetic over records: no settings, no I/O. The
graphs in :mod:`pacore_graph.graphs.deepconf` and the reference filter
(:func:`most_confident`, for ``--reference-filter confidence:F``) use it.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pacore_graph.values.aggregation import extract_final_answer
from pacore_graph.values.answer_groups import group_answers
from pacore_graph.values.records import Trajectory

__all__ = [
    "DEFAULT_TOP_LOGPROBS",
    "DEFAULT_WINDOW",
    "ConfidenceConsensus",
    "ConfidenceFilter",
    "WindowConfidence",
    "compact_logprobs",
    "confidence_consensus",
    "group_confidences",
    "lowest_group_confidence",
    "most_confident",
    "parse_reference_filter",
    "percentile",
    "share_threshold",
    "token_confidence",
    "token_confidences",
    "top_share",
    "trajectory_confidence",
    "weighted_vote",
]

#: DeepConf's sliding window, in tokens (paper and code).
DEFAULT_WINDOW = 2048
#: DeepConf's k: vLLM's ``logprobs=20`` (over the API: ``top_logprobs: 20``).
DEFAULT_TOP_LOGPROBS = 20


def token_confidence(entry: Mapping[str, Any]) -> float | None:
    """One token's confidence: ``-mean(top-k logprobs)``, rounded to 3 decimals.

    ``entry`` is one OpenAI ``logprobs.content`` item, or one kept by
    :func:`compact_logprobs` (its ``confidence`` already computed). None when
    it carries no number at all (a server that sent an empty entry: nothing to
    judge).
    """
    kept = entry.get("confidence")
    if isinstance(kept, int | float) and not isinstance(kept, bool):
        return float(kept)
    top = entry.get("top_logprobs")
    values: list[float] = []
    if isinstance(top, list):
        values = [
            float(t["logprob"])
            for t in top
            if isinstance(t, Mapping) and isinstance(t.get("logprob"), int | float)
        ]
    if not values:
        own = entry.get("logprob")
        if not isinstance(own, int | float) or isinstance(own, bool):
            return None
        values = [float(own)]
    return round(-sum(values) / len(values), 3)


def compact_logprobs(logprobs: Any) -> Any:
    """A trajectory's log-probabilities as a record keeps them: each token's top-k folded.

    Why: DeepConf asks for ``top_logprobs: 20``, and the server's answer is
    about 1.2 KB per token (20 alternatives with their bytes); kept whole in
    results lines and checkpoints, 16 traces of 10k tokens would be 200 MB per
    problem (a 20-problem eval of 60-token traces already wrote 45 MB). What
    anything downstream reads of them is each token's confidence (this
    module), and its text and own log-probability (RL export), so an entry
    with ``top_logprobs`` keeps ``token``, ``logprob`` and its computed
    ``confidence``; the alternatives and ``bytes`` go. Anything else (no
    alternatives, other shapes, None) is returned as it is.
    """
    if not isinstance(logprobs, Mapping):
        return logprobs
    content = logprobs.get("content")
    if not isinstance(content, list) or not any(
        isinstance(e, Mapping) and e.get("top_logprobs") for e in content
    ):
        return logprobs
    kept: list[Any] = []
    for entry in content:
        if not isinstance(entry, Mapping):
            kept.append(entry)
            continue
        small = {k: entry[k] for k in ("token", "logprob") if k in entry}
        conf = token_confidence(entry)
        if conf is not None:
            small["confidence"] = conf
        kept.append(small)
    return {**logprobs, "content": kept}


def _entries(logprobs: Any) -> list[Any]:
    """The per-token entries of a trajectory's ``logprobs`` (OpenAI shape or a plain list)."""
    if isinstance(logprobs, Mapping):
        content = logprobs.get("content")
        return list(content) if isinstance(content, list) else []
    if isinstance(logprobs, list | tuple):
        return list(logprobs)
    return []


def token_confidences(logprobs: Any) -> list[float]:
    """Every token's confidence, in order (entries without numbers skipped, as in DeepConf)."""
    out: list[float] = []
    for entry in _entries(logprobs):
        if isinstance(entry, Mapping):
            conf = token_confidence(entry)
            if conf is not None:
                out.append(conf)
    return out


def group_confidences(confs: Sequence[float], window: int = DEFAULT_WINDOW) -> list[float]:
    """Sliding-window means (DeepConf's ``compute_least_grouped``); a short trace is one group."""
    if window < 1:
        raise ValueError(f"the confidence window must be at least 1 token; got {window}")
    if not confs:
        return [0.0]
    if len(confs) < window:
        return [sum(confs) / len(confs)]
    means: list[float] = []
    total = math.fsum(confs[:window])
    means.append(round(total / window, 3))
    for i in range(window, len(confs)):
        total += confs[i] - confs[i - window]
        means.append(round(total / window, 3))
    return means


def lowest_group_confidence(confs: Sequence[float], window: int = DEFAULT_WINDOW) -> float:
    """The weakest window of a trace (DeepConf's ``min_conf``)."""
    return min(group_confidences(confs, window))


def trajectory_confidence(t: Trajectory, window: int = DEFAULT_WINDOW) -> float | None:
    """A trajectory's lowest group confidence; None when it has no log-probabilities."""
    confs = token_confidences(t.logprobs)
    return lowest_group_confidence(confs, window) if confs else None


def percentile(values: Sequence[float], q: float) -> float:
    """numpy's default (linear) percentile, without numpy."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be in [0, 100]; got {q}")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _check_share(share: float) -> None:
    if isinstance(share, bool) or not 0 < share <= 1:
        raise ValueError(f"the confidence share must be in (0, 1]; got {share!r}")


def share_threshold(scores: Sequence[float], share: float) -> float:
    """The score at or above which the top ``share`` lies: the ``(1 - share)`` percentile."""
    _check_share(share)
    return percentile(scores, (1 - share) * 100)


def top_share(scores: Sequence[float], share: float) -> list[int]:
    """Indices of the scores at or above the top-``share`` threshold (ties all kept)."""
    if not scores:
        return []
    bar = share_threshold(scores, share)
    return [i for i, s in enumerate(scores) if s >= bar]


def weighted_vote(
    answers: Sequence[str | None],
    weights: Sequence[float],
    equivalent: Callable[[str, str], bool] | None = None,
) -> tuple[int | None, dict[str, float]]:
    """Confidence-weighted vote: (index of the winner's first voter, weight per answer).

    Answers group by ``equivalent`` (exact text when None) with the votes'
    one grouping routine (:func:`~pacore_graph.values.answer_groups.group_answers`);
    None answers do not vote. The heaviest group wins; a tie goes to the
    group seen first (DeepConf's ``max`` over an insertion-ordered dict).
    """
    if len(answers) != len(weights):
        raise ValueError(f"{len(answers)} answers but {len(weights)} weights")
    groups = group_answers(answers, equivalent, weights)
    if not groups:
        return None, {}
    best = groups[0]
    for group in groups[1:]:
        if group.weight > best.weight:
            best = group
    return best.first, {g.answer: round(g.weight, 6) for g in groups}


@dataclass(slots=True)
class WindowConfidence:
    """A streamed trace's running window: push token confidences, ask whether to stop.

    The online rule of DeepConf's logits processor: once the window holds
    ``window`` tokens, the trace stops the first time the window's mean is
    below ``threshold``. ``lowest`` is the lowest full-window mean seen (or
    the running mean while the window is not yet full).
    """

    threshold: float
    window: int = DEFAULT_WINDOW
    tokens: int = 0
    lowest: float | None = None
    _recent: deque[float] = field(default_factory=deque)
    _sum: float = 0.0
    _full_seen: bool = False

    def __post_init__(self) -> None:
        if self.window < 1:
            raise ValueError(f"the confidence window must be at least 1 token; got {self.window}")

    def push(self, conf: float) -> bool:
        """Add one token's confidence; True when the trace should stop now."""
        self.tokens += 1
        self._recent.append(conf)
        self._sum += conf
        if len(self._recent) > self.window:
            self._sum -= self._recent.popleft()
        full = len(self._recent) >= self.window
        if not full:  # not a window yet: the trace so far is one group, its mean
            self.lowest = self._sum / len(self._recent)
            return False
        mean = round(self._sum / self.window, 3)
        if not self._full_seen or self.lowest is None or mean < self.lowest:
            self.lowest = mean
        self._full_seen = True
        return mean < self.threshold

    def push_entries(self, entries: Sequence[Any]) -> bool:
        """Push every numbered entry of a streamed chunk; True once any pushes past the bar."""
        stop = False
        for entry in entries:
            if isinstance(entry, Mapping):
                conf = token_confidence(entry)
                if conf is not None and self.push(conf):
                    stop = True
                    break
        return stop


# ------------------------------------------------------- --reference-filter


@dataclass(frozen=True, slots=True)
class ConfidenceFilter:
    """``--reference-filter confidence:F``: the most confident share F of a round goes on."""

    share: float
    window: int = DEFAULT_WINDOW

    def __post_init__(self) -> None:
        _check_share(self.share)
        if isinstance(self.window, bool) or self.window < 1:
            raise ValueError(f"the confidence window must be at least 1 token; got {self.window}")

    @property
    def spec(self) -> str:
        """The filter as typed, canonical: ``confidence:F``, or ``confidence:F,W`` off 2048.

        Configs, records and eval reports hold this text, so one filter
        always reads the same wherever it is recorded.
        """
        window = "" if self.window == DEFAULT_WINDOW else f",{self.window}"
        return f"confidence:{self.share:.15g}{window}"

    def apply(self, trajectories: Sequence[Trajectory]) -> tuple[Trajectory, ...]:
        """See :func:`most_confident`."""
        return most_confident(trajectories, self.share, self.window)


_FILTER_FORM = "a reference filter is confidence:F (a share in (0, 1]) or confidence:F,W"


def parse_reference_filter(text: str) -> ConfidenceFilter:
    """``confidence:F`` or ``confidence:F,W`` (share F in (0, 1], window W tokens).

    Messages do not name a flag: each surface labels them its own way
    (``--reference-filter: ...`` on the command line).
    """
    kind, _, rest = text.strip().partition(":")
    if kind.strip() != "confidence" or not rest.strip():
        raise ValueError(f"{_FILTER_FORM}; got {text!r}")
    share_text, comma, window_text = rest.partition(",")
    if comma and not window_text.strip():
        raise ValueError(f"{_FILTER_FORM}: no window after the comma in {text!r}")
    try:
        share = float(share_text)
        window = int(window_text) if comma else DEFAULT_WINDOW
    except ValueError:
        raise ValueError(f"{_FILTER_FORM}: not a number in {text!r}") from None
    return ConfidenceFilter(share=share, window=window)


def most_confident(
    trajectories: Sequence[Trajectory], share: float, window: int = DEFAULT_WINDOW
) -> tuple[Trajectory, ...]:
    """The round with only its most confident share passed on (explorer order kept).

    Failed trajectories stay in the round (the reference rules drop them
    anyway, and the public order counts them); a successful trajectory without
    log-probabilities cannot be judged, so nothing is filtered when any has
    none (the filter never silently drops what it cannot score). At least
    one trajectory is always kept.
    """
    _check_share(share)
    usable = [t for t in trajectories if not t.failed]
    scores = [trajectory_confidence(t, window) for t in usable]
    if not usable or any(s is None for s in scores):
        return tuple(trajectories)
    kept_ids = {usable[i].id for i in top_share([s for s in scores if s is not None], share)}
    return tuple(t for t in trajectories if t.failed or t.id in kept_ids)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfidenceConsensus:
    """How far a round agrees when each vote weighs its confidence (cf. ``Consensus``)."""

    answer: str | None
    share: float
    trajectory: Trajectory | None
    weights: dict[str, float] = field(default_factory=dict)


def confidence_consensus(
    trajectories: Sequence[Trajectory],
    window: int = DEFAULT_WINDOW,
    extract: Callable[[str], str | None] = extract_final_answer,
) -> ConfidenceConsensus:
    """A round's agreement with each vote weighed by its lowest group confidence.

    For ``--early-stop-consensus`` weighing votes by confidence: the share is
    the winning answer's confidence over the confidence of every explorer
    counted (failed calls and answers that cannot be extracted weigh their
    confidence, or 0 when they have none, against agreement, as they count
    against it unweighted). None of it applies when a successful trajectory
    has no log-probabilities: the caller falls back to the plain count.
    """
    ordered = sorted(trajectories, key=lambda t: t.index)
    answers: list[str | None] = []
    weights: list[float] = []
    for t in ordered:
        score = None if t.failed else trajectory_confidence(t, window)
        if not t.failed and score is None:
            raise ValueError(f"trajectory {t.id} has no log-probabilities to weigh its vote")
        answers.append(None if t.failed else extract(t.content))
        weights.append(score or 0.0)
    winner, totals = weighted_vote(answers, weights)
    total = sum(weights)
    if winner is None or total <= 0:
        return ConfidenceConsensus(answer=None, share=0.0, trajectory=None)
    answer = answers[winner] or ""
    return ConfidenceConsensus(
        answer=answer,
        share=totals[answer] / total,
        trajectory=ordered[winner],
        weights={a: round(w, 3) for a, w in totals.items()},
    )
