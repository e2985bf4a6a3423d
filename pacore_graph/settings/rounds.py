"""A round of a run: its width K, and when it differs from the run's, its own sampling and model.

``rounds`` (a config's, a run context's, a ``pacore serve`` request's) holds
plain widths and :class:`Round` values, mixed freely::

    PaCoReConfig(rounds=[Round(16, temperature=1.0, model="small"), 4],
                 final=Round(1, temperature=0.2, model="large"))

runs a round of 16 samples of the model ``small`` at temperature 1.0, a
round of 4 with the run's own sampling, then the answer round of 1 on
``large`` at 0.2 ("a small model explores, a large one synthesises"). A
setting a round leaves ``None`` is the run's (its ``temperature``,
``top_p``, ``max_tokens``, and the client's model); ``model`` is the model
name the round's requests carry (an OpenAI-compatible server's ``model``).

A round that sets nothing is its width: ``Round(4)`` is stored as ``4``, so
a run without per-round settings is exactly the run it always was (one
``n=K`` request per round, nothing extra in its records).

Plain data validated on construction (bounds from the settings catalogue),
so a bad round fails where it is written, and pydantic reads one from JSON
(``{"k": 4, "temperature": 0.2}``) through the same checks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from pacore_graph.settings.fields import SETTINGS
from pacore_graph.settings.grammar import width

if TYPE_CHECKING:
    from pacore_graph.settings.config import SamplingParams

__all__ = [
    "ROUND_SETTINGS",
    "Round",
    "RoundItem",
    "final_round",
    "round_from",
    "rounds_from_items",
    "widths_of",
]

#: The settings a round may set for itself (besides its width ``k``).
ROUND_SETTINGS = ("temperature", "top_p", "max_tokens", "model")
#: Longest model name a round may carry.
MAX_MODEL_NAME = 200


@dataclass(frozen=True, slots=True)
class Round:
    """One round: ``k`` explorers, and the sampling and model they use when not the run's.

    ``Round(4)`` is a round of 4 like the plain ``4``; ``Round(16, model="small")``
    sends that round's requests to the model ``small``; ``final=Round(1,
    temperature=0.2)`` sets the answer round's sampling.
    """

    k: int
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", width(self.k, "Round.k"))
        for name in ("temperature", "top_p", "max_tokens"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, SETTINGS[name].check(value, f"Round.{name}"))
        if self.model is not None and (
            not isinstance(self.model, str)
            or not self.model.strip()
            or len(self.model) > MAX_MODEL_NAME
        ):
            raise ValueError(
                f"Round.model must be a model name (1 to {MAX_MODEL_NAME} characters), "
                f"got {self.model!r}"
            )

    @property
    def settings(self) -> dict[str, Any]:
        """The settings this round sets itself (the ones not ``None``)."""
        return {name: v for name in ROUND_SETTINGS if (v := getattr(self, name)) is not None}

    def sampling(self, base: SamplingParams) -> SamplingParams:
        """``base`` (the run's sampling) with this round's own settings applied."""
        own = self.settings
        return base.model_copy(update=own) if own else base


#: An item of ``rounds``: a width, or a :class:`Round`.
RoundItem = int | Round

_ROUND_KEYS = frozenset(f.name for f in fields(Round))


def round_from(value: Any, *, what: str = "rounds[0]", k: int | None = None) -> RoundItem:
    """One item of ``rounds``: a width, a :class:`Round`, or a JSON object of one.

    A round that sets nothing beyond its width is returned as the width.
    ``k``, when given, is the width a mapping without ``k`` gets (``final``'s 1).
    Raises ``ValueError`` naming ``what``.
    """
    if isinstance(value, Round):
        found = value
    elif isinstance(value, Mapping):
        unknown = sorted(str(key) for key in value if key not in _ROUND_KEYS)
        if unknown:
            raise ValueError(
                f"{what}: unknown round setting(s) {unknown}; a round takes "
                f"k, {', '.join(ROUND_SETTINGS)}"
            )
        given = dict(value)
        if "k" not in given:
            if k is None:
                raise ValueError(f"{what}: a round needs its width k, e.g. {{'k': 4}}")
            given["k"] = k
        try:
            found = Round(**given)
        except ValueError as exc:
            raise ValueError(f"{what}: {exc}") from None
    else:
        return width(value, f"{what} = {value!r}: K")
    return found if found.settings else found.k


def final_round(value: Any, *, what: str = "final") -> Round | None:
    """The answer round's settings: a :class:`Round` of k=1 (``k`` may be left out).

    ``None`` when it sets nothing (the run's sampling then applies).
    """
    if value is None:
        return None
    found = round_from(value, what=what, k=1)
    k = found.k if isinstance(found, Round) else found
    if k != 1:
        raise ValueError(f"{what} is the answer round: its k must be 1, got {k}")
    return found if isinstance(found, Round) else None


def rounds_from_items(items: Iterable[Any], *, what: str = "rounds") -> tuple[RoundItem, ...]:
    """``rounds`` as given (widths, rounds, their JSON), checked, at least one."""
    values = list(items)
    if not values:
        raise ValueError(f"{what} must hold at least one round width K >= 1, e.g. [4]")
    return tuple(round_from(v, what=f"{what}[{i}]") for i, v in enumerate(values))


def widths_of(rounds: Iterable[RoundItem]) -> tuple[int, ...]:
    """The widths of ``rounds`` (a :class:`Round`'s ``k``, a width as it is)."""
    return tuple(r.k if isinstance(r, Round) else r for r in rounds)
