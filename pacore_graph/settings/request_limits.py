"""Per-request budgets: how much work one request may ask for, checked in one place.

A PaCoRe request names its own cost: its round widths decide how many model
calls it starts and ``max_tokens`` how long each may run. Where a request
comes from someone else (a served graph's ``config["configurable"]``, a
``pacore serve`` body or model name), one request could otherwise start
millions of upstream calls. :class:`RequestLimits` is the one validator every
surface applies -- the graph's per-run settings
(:func:`pacore_graph.settings.per_run.resolve_settings`), ``pacore serve``'s request
parsing and the CLI's settings model
(:class:`pacore_graph.settings.env_settings.PaCoReSettings`, which the served graph
also reads) -- so a cap means the same thing everywhere:

- ``max_rounds`` (default 16): configured rounds per request (the final K=1
  round is added to these, as with ``--rounds``);
- ``max_samples_per_request`` (default 4096): model calls (samples) of all
  rounds together, the final round's one included (``high`` = 32+4+1 = 37);
- ``max_tokens_cap`` (default 131072, the paper's context): ``max_tokens``
  per call.

The other served methods (``rsa:N,K,T``, ``deepconf:N``, ...) name their cost
by their spec: :meth:`RequestLimits.check_method` counts their rounds (RSA's
T populations) and model calls (the spec's ``expected_trajectories``, N x T
for RSA) against the same caps, so ``rsa:1024,4,10`` is refused like
``pacore:1024,1024,...``.

An operator sets them with ``--max-rounds``, ``--max-samples-per-request`` and
``--max-tokens-cap`` (or ``PACORE_MAX_ROUNDS``, ...). A request over a cap is
refused before any model call with :class:`RequestLimitError`, which names
the field (``rounds`` or ``max_tokens``) so each surface can report it in its
own terms (a 400 with ``param``, ``configurable.rounds``, ``--rounds``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pacore_graph.errors import PaCoReError
from pacore_graph.settings.fields import LIMIT_NAMES, SETTINGS
from pacore_graph.settings.grammar import MethodSpec
from pacore_graph.settings.rounds import Round, RoundItem, widths_of

__all__ = [
    "DEFAULT_MAX_ROUNDS",
    "DEFAULT_MAX_SAMPLES_PER_REQUEST",
    "DEFAULT_MAX_TOKENS_CAP",
    "LIMIT_CEILING",
    "MAX_ROUNDS_CEILING",
    "RequestLimitError",
    "RequestLimits",
]

# The defaults and bounds are the catalogue's rows (``max_rounds``, ...), named here for code.
DEFAULT_MAX_ROUNDS: int = SETTINGS["max_rounds"].default
DEFAULT_MAX_SAMPLES_PER_REQUEST: int = SETTINGS["max_samples_per_request"].default
DEFAULT_MAX_TOKENS_CAP: int = SETTINGS["max_tokens_cap"].default
#: The largest value an operator may give any cap: limits exist to be finite.
LIMIT_CEILING = int(SETTINGS["max_tokens_cap"].le or 0)
#: The most rounds ``max_rounds`` may allow (the graph's recursion limit follows it).
MAX_ROUNDS_CEILING = int(SETTINGS["max_rounds"].le or 0)

LimitedField = Literal["rounds", "final", "max_tokens"]


class RequestLimitError(PaCoReError):
    """A request asks for more than a cap allows; ``field`` is ``rounds``, ``final`` (the
    answer round's own ``max_tokens``) or ``max_tokens``."""

    def __init__(self, field: LimitedField, message: str) -> None:
        super().__init__(message)
        self.field: LimitedField = field


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """The caps on one request's work (see the module docstring for their meaning).

    A plain dataclass, not a pydantic model: the option table the command
    line's parser is built from reads its defaults, and ``pacore --help``
    must not import pydantic.
    """

    max_rounds: int = DEFAULT_MAX_ROUNDS
    max_samples_per_request: int = DEFAULT_MAX_SAMPLES_PER_REQUEST
    max_tokens_cap: int = DEFAULT_MAX_TOKENS_CAP

    def __post_init__(self) -> None:
        """Each cap held to its row's bounds (:class:`~pacore_graph.settings.fields.BoundError`)."""
        for name in LIMIT_NAMES:
            SETTINGS[name].check(getattr(self, name))

    def check(
        self,
        *,
        rounds: Sequence[RoundItem] | None = None,
        max_tokens: int | None = None,
        final: Round | None = None,
    ) -> None:
        """Refuse ``rounds`` (configured widths or rounds), ``max_tokens`` or ``final`` over a cap.

        A :class:`~pacore_graph.settings.rounds.Round`'s own ``max_tokens``
        (in ``rounds`` or ``final``) is held to ``max_tokens_cap`` as the
        run's is: the one place a ``max_tokens`` meets its cap. ``None``
        means "not asked for" and passes. Raises :class:`RequestLimitError`
        naming the field; the message never echoes a long list back.
        """
        if rounds is not None:
            for item in rounds:
                if isinstance(item, Round) and item.max_tokens is not None:
                    self._check_tokens("rounds", item.max_tokens)
            rounds = widths_of(rounds)
            count = len(rounds)
            if count > self.max_rounds:
                raise RequestLimitError(
                    "rounds",
                    f"{count} rounds asked; at most {self.max_rounds} per request (max_rounds)",
                )
            samples = sum(rounds) + 1  # the final K=1 round
            if samples > self.max_samples_per_request:
                raise RequestLimitError(
                    "rounds",
                    f"{count} rounds of {sum(rounds)} samples (+1 final) = {samples} model "
                    f"calls; at most {self.max_samples_per_request} per request "
                    "(max_samples_per_request)",
                )
        if final is not None and final.max_tokens is not None:
            self._check_tokens("final", final.max_tokens)
        if max_tokens is not None:
            self._check_tokens("max_tokens", max_tokens)

    def check_settings(
        self, *, rounds: Sequence[RoundItem] | None = None, max_tokens: int | None = None
    ) -> None:
        """:meth:`check` of a run's settings, its error labelled by flag and variable.

        The one place a run's settings meet these caps: the settings model
        (:class:`~pacore_graph.settings.env_settings.PaCoReSettings`: flags and
        ``PACORE_*``) and :class:`~pacore_graph.serve.settings.ServeSettings`
        (built by ``pacore serve`` or in Python) both call it, so a
        ``--max-tokens`` over ``--max-tokens-cap`` reads the same from either.
        Raises ``ValueError`` (what pydantic turns into a validation error):
        ``--max-tokens (PACORE_MAX_TOKENS): max_tokens 101 is over the cap of
        100 per call (max_tokens_cap)``.
        """
        try:
            self.check(rounds=rounds, max_tokens=max_tokens)
        except RequestLimitError as exc:
            row = SETTINGS["rounds" if exc.field == "rounds" else "max_tokens"]
            raise ValueError(f"{row.option_string} ({row.env}): {exc}") from None

    def _check_tokens(self, field: LimitedField, max_tokens: int) -> None:
        if max_tokens > self.max_tokens_cap:
            raise RequestLimitError(
                field,
                f"max_tokens {max_tokens} is over the cap of {self.max_tokens_cap} per call "
                "(max_tokens_cap)",
            )

    def check_method(self, spec: MethodSpec) -> None:
        """Refuse a method spec whose run would start more rounds or model calls than allowed.

        A PaCoRe spec is :meth:`check` of its widths (the final round
        included); another method's rounds are the widths its spec names and
        its calls :attr:`~pacore_graph.settings.grammar.MethodSpec.expected_trajectories`.
        Raises :class:`RequestLimitError` for ``rounds``; the message names
        the family and the counts, never the spec's text.
        """
        if spec.family == "pacore":
            self.check(rounds=spec.rounds)
            return
        count = len(spec.rounds)
        if count > self.max_rounds:
            raise RequestLimitError(
                "rounds",
                f"{spec.family} runs {count} rounds; at most {self.max_rounds} per request "
                "(max_rounds)",
            )
        calls = spec.expected_trajectories
        if calls > self.max_samples_per_request:
            raise RequestLimitError(
                "rounds",
                f"{spec.family} runs {calls} model calls; at most "
                f"{self.max_samples_per_request} per request (max_samples_per_request)",
            )
