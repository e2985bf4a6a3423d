"""DeepConf (Deep Think with Confidence), offline and online, built from PaCoRe's parts.

DeepConf samples N traces with token log-probabilities and trusts a trace as
much as its weakest stretch: its *lowest group confidence*, the lowest mean
token confidence over a sliding window (the arithmetic, and the public code
it follows -- facebookresearch/deepconf at ``675529d`` -- are in
:mod:`pacore_graph.control.confidence`).

- **Offline** (``deepconf:N``, :func:`build_deepconf_graph`): N traces (one
  ``n=N`` request asking ``logprobs`` and ``top_logprobs``), then
  :class:`ConfidenceVote`: keep the traces with an answer whose lowest
  group confidence is in the top ``share`` (default 0.1: the public code's
  ``top10`` filter, the paper's DeepConf-low), and vote weighted by that
  confidence. The same graph as ``majority:N`` with another aggregator.
- **Online** (``deepconf-online:N``, :func:`build_deepconf_online_graph`):
  a warm-up round of W traces sets the bar, the ``(1 - keep)`` percentile of
  their lowest group confidences (the public code's ``100 -
  confidence_percentile``; default ``keep`` 0.9, its ``deepthink()``
  default, the paper's DeepConf-high); a second round runs the other N - W
  traces, each streamed, and stops each as soon as its full window's mean
  falls below the bar (the public code's logits processor forces the end
  token there; over HTTP the client hangs up, and the server stops
  decoding). A stopped trace is recorded with ``finish_reason`` ``dropped``,
  its text so far and the tokens it spent, which count in effective TTC.
  :class:`OnlineConfidenceVote` then votes, weighted by lowest group
  confidence, over the warm-up traces at or above the bar and the second
  round's traces that were not stopped (the public code's
  ``_perform_basic_voting``).

Where the paper leaves a detail open this follows the public code: k = 20
top log-probabilities, a 2,048-token window, a trace shorter than the window
is one group and is never stopped online, answers extracted from the text
(here with the project's one extractor, equivalent answers voting
together), ties to the answer seen first. The public code's warm-up is 16
traces of a budget of 256 or more; for the small N of a comparison the
default here is ``min(16, max(2, ceil(N / 4)))`` (a choice of ours: settable).
The kept share (offline ``share``, online ``keep``: the same η of the paper,
the share of traces trusted) and the window default to the run config's
``deepconf_keep`` and ``deepconf_window``, which ``--deepconf-keep`` and
``--deepconf-window`` set for ``pacore run --method`` and ``pacore eval``.

Only an HTTP request can be cancelled, not one choice of an ``n`` request,
so the online round sends one streamed request per trace (vLLM's prefix
cache makes their shared prompt cheap); a client without a watched stream
(``stream_each(..., watch=)``) gets JSON requests and the same rule applied
after the fact: the record says ``stopped_upstream: false`` and no tokens
are saved.

Both are PaCoRe's builder with other parts: offline, an aggregator
(:class:`ConfidenceVote`); online, a round plan (:class:`DeepConfOnlinePlan`:
after the warm-up, one prompt per trace carrying the bar in its
``extras``), the :class:`StoppingExplorer` that reads it, and
:class:`OnlineConfidenceVote`.
"""

from __future__ import annotations

import contextlib
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.runnables import RunnableConfig

from pacore_graph.control.confidence import (
    DEFAULT_TOP_LOGPROBS,
    DEFAULT_WINDOW,
    WindowConfidence,
    compact_logprobs,
    share_threshold,
    top_share,
    trajectory_confidence,
    weighted_vote,
)
from pacore_graph.control.limits import SequenceLimiter
from pacore_graph.errors import ModelCallError, PaCoReError, UpstreamTransportError
from pacore_graph.graph.builder import build_pacore_graph, chat_explorer
from pacore_graph.graph.explorer import ChatExplorer, ExploreTask, failed_trajectory
from pacore_graph.graph.plans import ExplorerPrompt, RoundInput, RoundPrompts
from pacore_graph.llm.batching import SampleBatcher
from pacore_graph.llm.choice_stream import STOPPED
from pacore_graph.llm.complete_only import chat_client
from pacore_graph.llm.protocols import ChatClient, SampleStreamingClient
from pacore_graph.otel.spans import TraceOptions, record_chat_request, record_chat_response
from pacore_graph.settings.config import MAX_ROUND_WIDTH, PaCoReConfig, SamplingParams
from pacore_graph.settings.request_limits import RequestLimits
from pacore_graph.values.aggregation import Verdict, extract_final_answer
from pacore_graph.values.answers import answers_equivalent
from pacore_graph.values.compaction import DEFAULT_COMPACTOR, Compactor
from pacore_graph.values.compactor_registry import CompactorRegistry
from pacore_graph.values.records import Completion, Trajectory

__all__ = [
    "DEFAULT_KEEP",
    "DEFAULT_SHARE",
    "STOP_BELOW",
    "ConfidenceUnavailableError",
    "ConfidenceVote",
    "DeepConfOnlinePlan",
    "OnlineConfidenceVote",
    "StoppingExplorer",
    "build_deepconf_graph",
    "build_deepconf_online_graph",
    "confidence_sampling",
    "default_warmup",
]


#: The kept share when neither the call nor the config names one: the paper's
#: DeepConf-low offline (the public ``top10`` filter), DeepConf-high online.
DEFAULT_SHARE = 0.1
DEFAULT_KEEP = 0.9


class ConfidenceUnavailableError(PaCoReError):
    """The server returned no token log-probabilities, so confidence cannot be judged."""


def confidence_sampling(
    params: SamplingParams, top_logprobs: int = DEFAULT_TOP_LOGPROBS
) -> SamplingParams:
    """``params`` asking for log-probabilities with ``top_logprobs`` alternatives per token."""
    return params.with_logprobs(top_logprobs)


def _scores(trajectories: Sequence[Trajectory], window: int) -> list[float]:
    scores: list[float] = []
    for t in trajectories:
        score = trajectory_confidence(t, window)
        if score is None:
            raise ConfidenceUnavailableError(
                f"trajectory {t.id} has no token log-probabilities: DeepConf needs a server "
                "that returns logprobs with top_logprobs (vLLM does; llama.cpp's server may not)"
            )
        scores.append(score)
    return scores


def _vote(
    voters: Sequence[Trajectory],
    scores: Sequence[float],
    extract: Callable[[str], str | None],
    equivalent: Callable[[str, str], bool],
) -> tuple[Trajectory | None, dict[str, float], str | None]:
    answers = [extract(t.content) for t in voters]
    winner, weights = weighted_vote(answers, scores, equivalent)
    if winner is None:
        return None, weights, None
    return voters[winner], weights, answers[winner]


@dataclass(frozen=True, slots=True)
class ConfidenceVote:
    """Offline DeepConf: the top ``share`` by lowest group confidence, a weighted vote.

    Traces with no extractable answer do not vote (nor count for the
    share), as in the public code; if none has an answer, the first
    successful trajectory is the answer, as in ``majority``.
    """

    share: float = DEFAULT_SHARE
    window: int = DEFAULT_WINDOW
    extract: Callable[[str], str | None] = extract_final_answer
    equivalent: Callable[[str, str], bool] = answers_equivalent
    name: str = "deepconf"

    def __post_init__(self) -> None:
        if isinstance(self.share, bool) or not 0 < self.share <= 1:
            raise ValueError(f"deepconf share must be in (0, 1]; got {self.share!r}")
        if self.window < 1:
            raise ValueError(f"deepconf window must be at least 1 token; got {self.window}")

    def aggregate(self, rounds: Sequence[Sequence[Trajectory]]) -> Verdict:
        usable = sorted((t for t in rounds[-1] if not t.failed), key=lambda t: t.index)
        if not usable:
            raise ValueError("no successful trajectory to choose an answer from")
        scores = _scores(usable, self.window)
        confidences = {t.id: s for t, s in zip(usable, scores, strict=True)}
        voting = [(t, s) for t, s in zip(usable, scores, strict=True) if self.extract(t.content)]
        kept = [voting[i] for i in top_share([s for _, s in voting], self.share)]
        details: dict[str, Any] = {
            "share": self.share,
            "window": self.window,
            "confidences": confidences,
            "kept": [t.id for t, _ in kept],
        }
        if voting:
            details["threshold"] = share_threshold([s for _, s in voting], self.share)
        chosen, weights, winner = _vote(
            [t for t, _ in kept], [s for _, s in kept], self.extract, self.equivalent
        )
        details["votes"] = weights
        if chosen is None:
            return Verdict(trajectory=usable[0], answer=usable[0].message or "", details=details)
        details["winner"] = winner
        return Verdict(trajectory=chosen, answer=chosen.message or "", details=details)


@dataclass(frozen=True, slots=True)
class OnlineConfidenceVote:
    """Online DeepConf's vote: warm-up traces at or above the bar, later traces not stopped."""

    keep: float = DEFAULT_KEEP
    window: int = DEFAULT_WINDOW
    extract: Callable[[str], str | None] = extract_final_answer
    equivalent: Callable[[str, str], bool] = answers_equivalent
    name: str = "deepconf-online"

    def threshold(self, warmup: Sequence[Trajectory]) -> float:
        """The bar: the ``(1 - keep)`` percentile of the warm-up's lowest group confidences."""
        usable = [t for t in warmup if not t.failed]
        if not usable:
            raise ValueError("every warm-up trace failed: no bar to stop later traces at")
        return share_threshold(_scores(usable, self.window), self.keep)

    def aggregate(self, rounds: Sequence[Sequence[Trajectory]]) -> Verdict:
        warmup = sorted(rounds[0], key=lambda t: t.index)
        later = sorted(rounds[1], key=lambda t: t.index) if len(rounds) > 1 else []
        bar = self.threshold(warmup)
        voters: list[Trajectory] = []
        scores: list[float] = []
        confidences: dict[str, float] = {}
        for t in [*warmup, *later]:
            if t.failed:
                continue
            (score,) = _scores([t], self.window)
            confidences[t.id] = score
            passed = score >= bar if t.round == 0 else t.finish_reason != STOPPED
            if passed and self.extract(t.content):
                voters.append(t)
                scores.append(score)
        chosen, weights, winner = _vote(voters, scores, self.extract, self.equivalent)
        details: dict[str, Any] = {
            "keep": self.keep,
            "window": self.window,
            "threshold": bar,
            "confidences": confidences,
            "voters": [t.id for t in voters],
            "dropped": [t.id for t in later if t.finish_reason == STOPPED],
            "votes": weights,
        }
        if chosen is None:
            fallback = next((t for t in [*later, *warmup] if not t.failed), None)
            if fallback is None:
                raise ValueError("no successful trajectory to choose an answer from")
            return Verdict(trajectory=fallback, answer=fallback.message or "", details=details)
        details["winner"] = winner
        return Verdict(trajectory=chosen, answer=chosen.message or "", details=details)


#: The key of an online trace's task ``extras``: its bar, ``{"threshold": T, "window": W}``.
STOP_BELOW = "deepconf_stop_below"


def _watches(client: object) -> bool:
    """Whether ``client.stream_each`` takes a ``watch`` (it can stop one choice mid-way)."""
    if not isinstance(client, SampleStreamingClient):
        return False
    try:
        return "watch" in inspect.signature(client.stream_each).parameters
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True, slots=True)
class StoppingExplorer:
    """The chat explorer, plus online DeepConf's stopped traces.

    A task whose ``extras`` hold :data:`STOP_BELOW` (the online plan's later
    traces) is streamed and stopped once its window's confidence falls below
    the bar; any other task is the chat explorer's. Its calls go through the
    chat explorer's batcher (``batcher``), so a round is one ``Send`` and the
    batcher holds the limits.
    """

    chat: ChatExplorer

    @property
    def batcher(self) -> SampleBatcher:
        return self.chat.batcher

    async def explore(self, task: ExploreTask, config: RunnableConfig) -> Trajectory:
        stop = task.extras.get(STOP_BELOW) if task.extras else None
        if not isinstance(stop, Mapping):
            return await self.chat.explore(task, config)
        threshold = float(stop["threshold"])
        window = int(stop.get("window", DEFAULT_WINDOW))
        batcher = self.chat.batcher
        client = batcher.client
        params = task.params or batcher.params
        record_chat_request(client, seed=task.seed)
        tracker = WindowConfidence(threshold, window)
        upstream = _watches(client)
        try:
            if upstream:
                completion = await self._watched(client, task, params, tracker)
            else:
                completion = await batcher.sample(
                    task.messages, group=task.group, expected=1, seed=task.seed, params=params
                )
                completion = _judged_after(completion, tracker)
        except ModelCallError as exc:
            return failed_trajectory(task, str(exc))
        record_chat_response(completion.model)
        return Trajectory(
            round=task.round,
            index=task.index,
            content=completion.content,
            reasoning=completion.reasoning,
            finish_reason=completion.finish_reason,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            latency_s=completion.latency_s,
            references=task.references,
            tokens_estimated=completion.tokens_estimated,
            logprobs=compact_logprobs(completion.logprobs),
            token_ids=completion.token_ids,
            model=completion.model,
            artifacts={
                "deepconf": {
                    "threshold": threshold,
                    "window": window,
                    "lowest": tracker.lowest,
                    "stopped": completion.finish_reason == STOPPED,
                    "stopped_upstream": upstream and completion.finish_reason == STOPPED,
                }
            },
        )

    async def _watched(
        self,
        client: Any,
        task: ExploreTask,
        params: SamplingParams,
        tracker: WindowConfidence,
    ) -> Completion:
        def watch(index: int, entries: Sequence[Any]) -> bool:
            return tracker.push_entries(entries)

        outcome: Any = None
        async with self.chat.batcher.limiter.hold(1):
            samples = client.stream_each(
                task.messages, n=1, params=params, seed=task.seed, watch=watch
            )
            async with contextlib.aclosing(samples):
                async for _, got in samples:
                    outcome = got
        if isinstance(outcome, ModelCallError):
            raise outcome
        if not isinstance(outcome, Completion):
            raise UpstreamTransportError("the stream ended without the sample")
        return outcome


def _judged_after(completion: Completion, tracker: WindowConfidence) -> Completion:
    """The online rule applied to a whole JSON sample (no tokens saved, but the same record)."""
    entries = (
        completion.logprobs.get("content") if isinstance(completion.logprobs, Mapping) else None
    )
    if not isinstance(entries, list):
        return completion
    return (
        replace(completion, finish_reason=STOPPED) if tracker.push_entries(entries) else completion
    )


@dataclass(frozen=True, slots=True)
class DeepConfOnlinePlan:
    """Online DeepConf's rounds as a round plan: the warm-up asks the question (one
    ``n=W`` request); then the bar is set from it, and each later trace asks the
    question again on its own request, its task carrying the bar (:data:`STOP_BELOW`)."""

    keep: float = DEFAULT_KEEP
    window: int = DEFAULT_WINDOW

    def __call__(self, round: RoundInput, /) -> RoundPrompts:
        if round.round == 0:
            return RoundPrompts.shared(round.problem, reads=())
        bar = OnlineConfidenceVote(self.keep, self.window).threshold(round.rounds[0])
        prompt = ExplorerPrompt(
            messages=round.problem,
            extras={STOP_BELOW: {"threshold": bar, "window": self.window}},
        )
        # One prompt per trace: its own request, the unit a server can cancel.
        return RoundPrompts(prompts=(prompt,) * round.width, reads=())


def _with_logprobs(config: PaCoReConfig, top_logprobs: int) -> PaCoReConfig:
    """``config`` asking for log-probabilities (the sampling value is validated on its own)."""
    return config.model_copy(
        update={"sampling": confidence_sampling(config.sampling, top_logprobs)}
    )


def default_warmup(n: int) -> int:
    """Warm-up traces for a budget of N: ``min(16, max(2, ceil(N / 4)))``, below N."""
    return min(16, max(2, math.ceil(n / 4)), n - 1)


def _check_n(label: str, n: int, low: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or not low <= n <= MAX_ROUND_WIDTH:
        raise ValueError(f"{label} needs N in [{low}, {MAX_ROUND_WIDTH}]; got {n!r}")


def _kept(given: float | None, config: PaCoReConfig, default: float) -> float:
    """The kept share: the call's, else the config's ``deepconf_keep``, else ``default``."""
    if given is not None:
        return given
    return config.deepconf_keep if config.deepconf_keep is not None else default


def build_deepconf_graph(
    client: ChatClient,
    n: int,
    *,
    config: PaCoReConfig | None = None,
    share: float | None = None,
    window: int | None = None,
    top_logprobs: int = DEFAULT_TOP_LOGPROBS,
    extract: Callable[[str], str | None] = extract_final_answer,
    **kwargs: Any,
) -> Any:
    """Offline DeepConf over ``n`` traces (``deepconf:N``); ``kwargs`` as for the builder.

    ``share`` and ``window`` left ``None`` are the config's (``deepconf_keep``,
    ``deepconf_window``: ``--deepconf-keep`` and ``--deepconf-window``), else
    0.1 and 2,048 tokens.
    """
    _check_n("deepconf:N", n, 1)
    base = config or PaCoReConfig()
    vote = ConfidenceVote(
        share=_kept(share, base, DEFAULT_SHARE),
        window=base.deepconf_window if window is None else window,
        extract=extract,
    )
    cfg = _with_logprobs(base.with_settings({"rounds": [n]}), top_logprobs)
    return build_pacore_graph(client, config=cfg, aggregator=vote, name="deepconf", **kwargs)


def build_deepconf_online_graph(
    client: ChatClient,
    n: int,
    *,
    config: PaCoReConfig | None = None,
    warmup: int | None = None,
    keep: float | None = None,
    window: int | None = None,
    top_logprobs: int = DEFAULT_TOP_LOGPROBS,
    extract: Callable[[str], str | None] = extract_final_answer,
    compactor: Compactor | str = DEFAULT_COMPACTOR,
    limiter: SequenceLimiter | None = None,
    tracing: TraceOptions | bool | None = None,
    checkpointer: Any = None,
    compactors: CompactorRegistry | Mapping[str, Compactor] | None = None,
    limits: RequestLimits | None = None,
) -> Any:
    """Online DeepConf with a budget of ``n`` traces (``deepconf-online:N``).

    ``keep`` and ``window`` left ``None`` are the config's (``deepconf_keep``,
    ``deepconf_window``: ``--deepconf-keep`` and ``--deepconf-window``), else
    0.9 and 2,048 tokens.
    """
    _check_n("deepconf-online:N", n, 2)
    client = chat_client(client)  # TypeError naming what a client needs
    base = config or PaCoReConfig()
    keep = _kept(keep, base, DEFAULT_KEEP)
    window = base.deepconf_window if window is None else window
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"deepconf-online: the window must be at least 1 token; got {window!r}")
    w = default_warmup(n) if warmup is None else warmup
    if isinstance(w, bool) or not isinstance(w, int) or not 1 <= w < n:
        raise ValueError(
            f"deepconf-online: the warm-up must be in [1, N-1] = [1, {n - 1}]; got {w!r}"
        )
    if isinstance(keep, bool) or not 0 < keep <= 1:
        raise ValueError(f"deepconf-online: keep must be a share in (0, 1]; got {keep!r}")
    vote = OnlineConfidenceVote(keep=keep, window=window, extract=extract)
    cfg = _with_logprobs(base.with_settings({"rounds": [w, n - w]}), top_logprobs)
    limiter = limiter or SequenceLimiter(cfg.max_concurrency)
    return build_pacore_graph(
        client,
        config=cfg,
        plan=DeepConfOnlinePlan(keep=keep, window=window),
        explorer=StoppingExplorer(chat_explorer(client, limiter, cfg)),
        aggregator=vote,
        compactor=compactor,
        limiter=limiter,
        tracing=tracing,
        name="deepconf-online",
        checkpointer=checkpointer,
        compactors=compactors,
        limits=limits,
    )
