"""Run configuration: round widths, sampling, retries, concurrency.

Everything a PaCoRe run depends on is one frozen pydantic value, validated
when the graph is *built*: a bad K vector or temperature fails before a single
request is sent, with a message that names the field and its allowed range.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from pacore_graph.settings.fields import SETTINGS, config_field
from pacore_graph.settings.grammar import MAX_ROUND_WIDTH, preset_widths
from pacore_graph.settings.presets import PRESETS
from pacore_graph.settings.rounds import (
    Round,
    RoundItem,
    final_round,
    rounds_from_items,
    widths_of,
)

__all__ = [
    "MAX_ROUND_WIDTH",
    "PRESETS",
    "ModelRetryPolicy",
    "PaCoReConfig",
    "PresetName",
    "SamplingParams",
]

PresetName = Literal["low", "medium", "high"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SamplingParams(_Frozen):
    """Sampling settings sent with every explorer call.

    Defaults are the public pipeline's: temperature 1.0, top_p 1.0 and no
    ``max_tokens`` (the server's context decides), because PaCoRe-8B was
    trained with those; diversity between explorers comes from sampling.
    """

    temperature: float = config_field("temperature")
    top_p: float = config_field("top_p")
    max_tokens: int | None = config_field("max_tokens")
    timeout: float = config_field("timeout")
    seed: int | None = config_field("seed")
    logprobs: bool = config_field("logprobs")
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="Extra JSON fields for the server (e.g. vLLM's top_k)."
    )
    model: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="The model name the requests carry (a round's own, see Round.model); "
        "None: the client's.",
    )

    def with_logprobs(self, top_logprobs: int = 20) -> SamplingParams:
        """These settings asking for log-probabilities, ``top_logprobs`` alternatives per token
        (what DeepConf's confidence is computed from; 20, the API's most, by default)."""
        if isinstance(top_logprobs, bool) or not 1 <= top_logprobs <= 20:
            raise ValueError(
                f"top_logprobs must be in [1, 20] (the API's range); got {top_logprobs}"
            )
        extra = {**self.extra_body}
        extra.setdefault("top_logprobs", top_logprobs)
        return SamplingParams.model_validate(
            {**self.model_dump(), "logprobs": True, "extra_body": extra}
        )

    def request_fields(self) -> dict[str, Any]:
        """The JSON fields of a chat-completions request these settings produce.

        ``model``, when set (a round's own model), replaces the client's in
        the body (:func:`~pacore_graph.llm.request_body.chat_body`).
        """
        body: dict[str, Any] = {"temperature": self.temperature, "top_p": self.top_p}
        if self.model is not None:
            body["model"] = self.model
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.logprobs:
            body["logprobs"] = True
        body.update(self.extra_body)
        return body


class ModelRetryPolicy(_Frozen):
    """Retries with exponential backoff for 429, 5xx and connection errors.

    Other 4xx answers (a bad request, an unknown model) are not retried: they
    would fail the same way again.
    """

    max_attempts: int = config_field("retries")
    initial_backoff: float = Field(0.5, ge=0.0, le=60.0)
    max_backoff: float = Field(8.0, ge=0.0, le=600.0)
    multiplier: float = Field(2.0, ge=1.0, le=10.0)
    jitter: float = Field(
        0.5, ge=0.0, le=1.0, description="Fraction of each backoff drawn at random."
    )
    max_retry_after: float = Field(
        60.0, ge=0.0, le=3600.0, description="Longest server Retry-After honoured (seconds)."
    )
    deadline: float | None = config_field("call_deadline")

    def call_seconds(self, timeout: float) -> float:
        """The total deadline of one call whose attempts each time out after ``timeout``."""
        return self.deadline if self.deadline is not None else timeout * self.max_attempts

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        return min(self.max_backoff, self.initial_backoff * self.multiplier ** (attempt - 1))

    def delay(
        self, attempt: int, *, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        """The actual wait before retry ``attempt``: jittered backoff, or the server's word.

        The backoff is drawn uniformly from ``[(1 - jitter) * b, b]`` so that
        requests failed by one burst (a wall of 429s) do not retry in lockstep.
        A ``Retry-After`` from the server wins when given (capped at
        ``max_retry_after``), with the same jitter added on top.
        """
        draw = (rng or random).random()
        base = self.backoff(attempt)
        if retry_after is not None:
            return min(retry_after, self.max_retry_after) + self.jitter * base * draw
        return base * (1.0 - self.jitter * draw)


#: The old name (it clashed with ``langgraph.types.RetryPolicy`` in a star
#: import beside LangGraph's names); kept for code that imports it from here.
RetryPolicy = ModelRetryPolicy


class PaCoReConfig(_Frozen):
    """One PaCoRe run's shape.

    ``rounds`` is K as configured, e.g. ``[32, 4]`` for ``high``; the run adds
    a final round of width 1 whose single trajectory is the answer, so
    ``[32, 4]`` runs 32, 4, then 1 (see :attr:`schedule`). An item may be a
    :class:`~pacore_graph.settings.rounds.Round` with its own sampling and
    model (``Round(16, model="small")``), and ``final`` sets the answer
    round's (``Round(1, temperature=0.2)``); :meth:`round_sampling` is what
    each round sends. A ``Round`` that sets nothing is stored as its width.
    """

    rounds: tuple[RoundItem, ...] = config_field("rounds", min_length=1)
    final: Round | None = config_field("final")
    sampling: SamplingParams = Field(default_factory=SamplingParams)
    retry: ModelRetryPolicy = Field(default_factory=ModelRetryPolicy)
    shuffle_seed: int | None = config_field("shuffle_seed")
    reference_order: Literal["public", "compacted"] = config_field("reference_order")
    max_concurrency: int = config_field("max_concurrency")
    batch_samples: bool = Field(
        True,
        description="Send explorers that share a prompt as one request with n=K "
        "(vLLM shares the prefix; far less HTTP work). Servers that ignore n get "
        "the missing samples as separate requests.",
    )

    round_quorum: float | int | None = config_field("round_quorum")
    round_deadline: float | None = config_field("round_deadline")
    early_stop_consensus: float | None = config_field("early_stop_consensus")
    token_budget: int | None = config_field("token_budget")

    # The methods' own settings (issue 21): read by the graph each applies to, unused otherwise.
    reference_filter: str | None = config_field("reference_filter")
    consensus_weight: Literal["count", "confidence"] = config_field("consensus_weight")
    rsa_final: Literal["majority", "aggregate"] = config_field("rsa_final")
    deepconf_keep: float | None = config_field("deepconf_keep")
    deepconf_window: int = config_field("deepconf_window")

    @field_validator("reference_filter")
    @classmethod
    def _check_reference_filter(cls, value: str | None) -> str | None:
        """``confidence:F[,W]`` checked now (nothing is sent with a bad one), kept canonical."""
        if value is None:
            return None
        from pacore_graph.control.confidence import parse_reference_filter

        return parse_reference_filter(value).spec

    @field_validator("round_quorum", mode="before")
    @classmethod
    def _check_quorum(cls, value: Any) -> Any:
        if value is None:
            return None
        if isinstance(value, str):
            from pacore_graph.control.quorum import parse_quorum

            return parse_quorum(value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"round_quorum must be a share in (0, 1] or a count; got {value!r}")
        if isinstance(value, float) and value > 1:
            if value != int(value):
                raise ValueError(f"round_quorum above 1 is a count and must be whole: {value!r}")
            value = int(value)
        if value <= 0:
            raise ValueError(f"round_quorum must be positive; got {value!r}")
        return value

    @field_validator("rounds", mode="before")
    @classmethod
    def _check_rounds(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError(
                "rounds must be a list of round widths such as [32, 4], not a string "
                "(the CLI's --rounds takes '32,4')"
            )
        if isinstance(value, Mapping | Round):
            raise ValueError(f"rounds must be a list of round widths or rounds, got {value!r}")
        try:
            items = list(value)
        except TypeError:
            raise ValueError(f"rounds must be a list of positive integers, got {value!r}") from None
        return rounds_from_items(items)

    @field_validator("final", mode="before")
    @classmethod
    def _check_final(cls, value: Any) -> Any:
        return final_round(value)

    @property
    def widths(self) -> tuple[int, ...]:
        """The configured widths K (a :class:`Round`'s ``k``), without the final round."""
        return widths_of(self.rounds)

    @property
    def schedule(self) -> tuple[int, ...]:
        """The widths actually run: the configured rounds plus the final K=1."""
        return (*self.widths, 1)

    @property
    def asks_confidence(self) -> bool:
        """Whether a setting asks PaCoRe to judge by DeepConf's confidence (which needs
        log-probabilities): a ``reference_filter``, or confidence-weighed early stops.

        A confidence weight without ``early_stop_consensus`` weighs nothing, so
        it alone does not ask.
        """
        weighed = self.consensus_weight == "confidence" and self.early_stop_consensus is not None
        return self.reference_filter is not None or weighed

    @property
    def has_round_settings(self) -> bool:
        """Whether any round (or ``final``) has its own sampling or model."""
        return self.final is not None or any(isinstance(r, Round) for r in self.rounds)

    def round_sampling(self, index: int) -> SamplingParams:
        """What round ``index`` sends: the run's sampling with that round's own settings.

        ``index`` ``len(rounds)`` is the answer step (the final synthesis
        round, or an aggregator that replaces it): ``final``'s settings.
        """
        item: RoundItem | None
        if index == len(self.rounds):
            item = self.final
        elif 0 <= index < len(self.rounds):
            item = self.rounds[index]
        else:
            raise IndexError(f"round {index} is not in a run of {len(self.rounds) + 1} rounds")
        return item.sampling(self.sampling) if isinstance(item, Round) else self.sampling

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> PaCoReConfig:
        """``low`` = [4], ``medium`` = [16], ``high`` = [32, 4] (the paper's Table 1)."""
        return cls(rounds=preset_widths(name), **overrides)

    def with_settings(self, settings: Mapping[str, Any]) -> PaCoReConfig:
        """This config with run settings given by flat name applied, validated as a whole.

        The one mapping from the names people type (``temperature``,
        ``retries``, ``preset``; :data:`~pacore_graph.settings.fields.SETTINGS`)
        onto the config's fields (``sampling.temperature``,
        ``retry.max_attempts``, ``rounds``): the CLI, ``PACORE_*`` variables,
        per-run settings and ``pacore serve`` requests all go through it.
        Returns ``self`` when nothing is given. Raises ``ValidationError``
        (located at the config field) or ``ValueError`` for a name that is
        not a config setting.
        """
        if not settings:
            return self
        data = self.model_dump()
        for name, value in settings.items():
            if name == "preset":
                name, value = "rounds", preset_widths(value)
            row = SETTINGS.get(name)
            if row is None or row.path is None:
                raise ValueError(f"{name!r} is not a setting of the run's configuration")
            *parents, leaf = row.path
            target = data
            for part in parents:
                target = target[part]
            target[leaf] = value
        return type(self).model_validate(data)

    def preset_name(self) -> str | None:
        """The preset these rounds match, if any (for reports and traces)."""
        widths = self.widths
        for name, rounds in PRESETS.items():
            if rounds == widths:
                return name
        return None
