"""Grouping votes by equivalent answers: the one routine every vote and consensus uses.

A vote groups its answers as a leader scan: in input order, each answer
joins the first group (in the order groups were made) whose first answer
(its *leader*, which names the group) is equal to it or equivalent to it
(``equivalent(leader, answer)``; math-verify is not symmetric, so the order
matters); otherwise it starts a group. :func:`group_answers_pairwise` is that
definition, written out: K answers cost up to K²/2 comparisons.

:func:`group_answers` gives the same groups (same leaders, members and
order) with far fewer comparisons:

- an answer seen before joins the group it joined then (a comparison depends
  only on the two texts, and groups are only ever added after it);
- with the default :func:`~pacore_graph.values.answers.answers_equivalent`,
  each distinct answer gets its key once
  (:func:`~pacore_graph.values.answer_keys.answer_key`, cached per text), an
  index over the leaders' keys finds the leaders it could be equivalent to,
  and only those are compared, first made first. Leaders the index leaves
  out cannot be equivalent (the key is a necessary condition), so the first
  match is the one the full scan finds;
- ``equivalent=None`` groups by exact text (the early stop on consensus);
- any other ``equivalent`` is an opaque function: the full scan.

A vote can be long (a thousand distinct answers to parse) and usually runs
on a worker thread (:func:`pacore_graph.values.aggregation.aggregate_off_loop`):
inside :func:`cancellable` it checks its stop event between answers and
between comparisons and raises :class:`VoteCancelledError` once it is set.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from pacore_graph.errors import PaCoReError
from pacore_graph.values.answer_keys import AnswerKey, Probe, answer_key, probe_window, probes_meet
from pacore_graph.values.answers import answers_equivalent

__all__ = [
    "AnswerGroup",
    "Equivalence",
    "VoteCancelledError",
    "cancellable",
    "check_cancelled",
    "group_answers",
    "group_answers_pairwise",
]

Equivalence = Callable[[str, str], bool]


class VoteCancelledError(PaCoReError):
    """The vote's stop event was set (its run was cancelled): the vote stops unfinished."""


_STOP: ContextVar[threading.Event | None] = ContextVar("pacore_vote_stop", default=None)


@contextmanager
def cancellable(stop: threading.Event) -> Iterator[None]:
    """Votes run inside this block (and threads started from it) stop once ``stop`` is set."""
    token = _STOP.set(stop)
    try:
        yield
    finally:
        _STOP.reset(token)


def check_cancelled() -> None:
    """Raise :class:`VoteCancelledError` if the current vote was asked to stop."""
    stop = _STOP.get()
    if stop is not None and stop.is_set():
        raise VoteCancelledError("the vote was cancelled")


@dataclass(frozen=True, slots=True)
class AnswerGroup:
    """Votes for one answer: its leader's text, where it came first, how many and how heavy.

    ``first`` and ``members`` are positions in the sequence that was grouped.
    """

    answer: str
    first: int
    count: int
    weight: float
    members: tuple[int, ...]


@dataclass(slots=True)
class _Group:
    answer: str
    first: int
    weight: float
    members: list[int] = field(default_factory=list)

    def frozen(self) -> AnswerGroup:
        return AnswerGroup(
            answer=self.answer,
            first=self.first,
            count=len(self.members),
            weight=self.weight,
            members=tuple(self.members),
        )


def _weights(answers: Sequence[str | None], weights: Sequence[float] | None) -> list[float]:
    if weights is None:
        return [1.0] * len(answers)
    if len(weights) != len(answers):
        raise ValueError(f"{len(answers)} answers but {len(weights)} weights")
    return [float(w) for w in weights]


def group_answers_pairwise(
    answers: Sequence[str | None],
    equivalent: Equivalence | None = answers_equivalent,
    weights: Sequence[float] | None = None,
) -> list[AnswerGroup]:
    """The leader scan as defined (module docstring): every answer against every leader.

    Falsy answers (None, ``""``) do not vote. Groups come in the order they
    were made; a group's weight adds its members' weights in input order.
    """
    ws = _weights(answers, weights)
    groups: list[_Group] = []
    for i, answer in enumerate(answers):
        if not answer:
            continue
        check_cancelled()
        for group in groups:
            if group.answer == answer or (
                equivalent is not None and equivalent(group.answer, answer)
            ):
                group.weight += ws[i]
                group.members.append(i)
                break
        else:
            groups.append(_Group(answer, i, ws[i], [i]))
    return [g.frozen() for g in groups]


def group_answers(
    answers: Sequence[str | None],
    equivalent: Equivalence | None = answers_equivalent,
    weights: Sequence[float] | None = None,
) -> list[AnswerGroup]:
    """The groups :func:`group_answers_pairwise` makes, comparing only what could match.

    Linear in the number of answers for the default equivalence, apart from
    the comparisons between answers whose keys meet.
    """
    ws = _weights(answers, weights)
    groups: list[_Group] = []
    joined: dict[str, int] = {}  # answer text -> its group
    index = _LeaderIndex() if equivalent is answers_equivalent else None
    for i, answer in enumerate(answers):
        if not answer:
            continue
        gid = joined.get(answer)
        if gid is None:
            check_cancelled()
            gid = _first_match(answer, groups, equivalent, index)
            joined[answer] = len(groups) if gid is None else gid
        if gid is None:
            if index is not None:
                index.add(len(groups), answer_key(answer))
            groups.append(_Group(answer, i, ws[i], [i]))
        else:  # weights add in input order, as in the scan: the same float sums
            groups[gid].weight += ws[i]
            groups[gid].members.append(i)
    return [g.frozen() for g in groups]


def _first_match(
    answer: str,
    groups: list[_Group],
    equivalent: Equivalence | None,
    index: _LeaderIndex | None,
) -> int | None:
    """The first group (in making order) whose leader is equivalent to ``answer``."""
    if equivalent is None:
        return None  # exact text only: a text seen before was found in ``joined``
    if index is None:
        candidates: Sequence[int] = range(len(groups))
    else:
        candidates = sorted(index.candidates(answer_key(answer)))
    for n, gid in enumerate(candidates):
        if n and n % 16 == 0:
            check_cancelled()
        if equivalent(groups[gid].answer, answer):
            return gid
    return None


@dataclass(slots=True)
class _Space:
    """One probe space's leaders: values sorted by real part, and the any-value ones."""

    reals: list[float] = field(default_factory=list)
    entries: list[tuple[int, Probe]] = field(default_factory=list)
    anys: list[int] = field(default_factory=list)

    def add(self, gid: int, probe: Probe) -> None:
        if probe.value is None:
            self.anys.append(gid)
            return
        at = bisect.bisect(self.reals, probe.value.real)
        self.reals.insert(at, probe.value.real)
        self.entries.insert(at, (gid, probe))

    def meeting(self, probe: Probe, out: set[int]) -> None:
        out.update(self.anys)
        if probe.value is None:
            out.update(gid for gid, _ in self.entries)
            return
        window = probe_window(probe)
        lo = bisect.bisect_left(self.reals, probe.value.real - window)
        hi = bisect.bisect_right(self.reals, probe.value.real + window)
        out.update(gid for gid, other in self.entries[lo:hi] if probes_meet(probe, other))


@dataclass(slots=True)
class _LeaderIndex:
    """The leaders' keys, looked up by what a new key could meet (``keys_meet``)."""

    count: int = 0
    tokens: dict[Hashable, list[int]] = field(default_factory=dict)
    spaces: dict[tuple[Hashable, ...], _Space] = field(default_factory=dict)
    wild: list[int] = field(default_factory=list)
    relations: list[int] = field(default_factory=list)
    sets: list[int] = field(default_factory=list)
    any_sets: list[int] = field(default_factory=list)

    def add(self, gid: int, key: AnswerKey) -> None:
        self.count += 1
        for token in key.tokens:
            self.tokens.setdefault(token, []).append(gid)
        for probe in key.probes:
            self.spaces.setdefault(probe.space, _Space()).add(gid, probe)
        for flag, ids in (
            (key.wild, self.wild),
            (key.relation, self.relations),
            (key.set_like, self.sets),
            (key.any_set, self.any_sets),
        ):
            if flag:
                ids.append(gid)

    def candidates(self, key: AnswerKey) -> set[int]:
        if key.wild:
            return set(range(self.count))
        out: set[int] = set(self.wild)
        for token in key.tokens:
            out.update(self.tokens.get(token, ()))
        if key.relation:
            out.update(self.sets)
        if key.set_like:
            out.update(self.relations)
            out.update(self.any_sets)
        if key.any_set:
            out.update(self.sets)
        for probe in key.probes:
            space = self.spaces.get(probe.space)
            if space is not None:
                space.meeting(probe, out)
        return out
