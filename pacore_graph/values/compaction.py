"""Message compaction: m = C(w), what one trajectory passes to the next round.

A compactor is one method, ``compact(trajectory) -> str``. Compaction is what
keeps each round's context at |x| + sum |m| instead of growing with every
token the explorers spent, so the built-ins all keep the *conclusion*:

- ``conclusion``: the paper's compactor, everything after the last
  ``</think>`` (the whole text when there is none). When the server returned
  the reasoning in its own field, ``content`` already is the conclusion.
- ``answer``: only the final answer, read by the one answer extractor
  (:func:`~pacore_graph.values.answers.extract_answer`): the last ``\\boxed{...}``, an
  explicit "the answer is X", else the last non-empty line of the conclusion.
- ``budget:N``: the conclusion, cut to its last N tokens when longer.

Tool-using explorers compact the same way: their ``content`` is the final
assistant message, never the tool transcript.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pacore_graph.values.answers import extract_answer, extract_boxed, split_conclusion
from pacore_graph.values.records import Trajectory

__all__ = [
    "DEFAULT_COMPACTOR",
    "AnswerCompactor",
    "Compactor",
    "ConclusionCompactor",
    "TokenBudgetCompactor",
    "approximate_tokens",
    "builtin_compactor",
    "compactor_from_name",
    "extract_boxed",
    "split_conclusion",
]


#: The compactor a run uses unless told otherwise: the paper's (:class:`ConclusionCompactor`).
#: The one spelling of the default; the settings catalogue's ``compactor`` row and every
#: ``compactor=`` keyword name this constant.
DEFAULT_COMPACTOR = "conclusion"


@runtime_checkable
class Compactor(Protocol):
    """Turns a finished trajectory into the message later rounds will read."""

    @property
    def name(self) -> str:
        """Short name used in reports and traces."""
        ...

    def compact(self, trajectory: Trajectory) -> str: ...


@dataclass(frozen=True, slots=True)
class ConclusionCompactor:
    """The paper's compactor: keep only the conclusion of a trajectory."""

    name: str = "conclusion"

    def compact(self, trajectory: Trajectory) -> str:
        return split_conclusion(trajectory.content)


@dataclass(frozen=True, slots=True)
class AnswerCompactor:
    r"""Keep only the final answer: ``\boxed{X}``, a stated answer, else the last line.

    The answer is the one :func:`~pacore_graph.values.answers.extract_answer` reads
    (fallback ``line``), so compaction, voting and grading agree on it; a
    response with no answer (an empty box, junk) compacts to the empty text.
    """

    name: str = "answer"

    def compact(self, trajectory: Trajectory) -> str:
        answer = extract_answer(trajectory.content, fallback="line")
        if answer is None:
            return ""
        return f"\\boxed{{{answer.text}}}" if answer.source == "boxed" else answer.text


_TOKEN_RE = re.compile(r"\s*\S+")


def approximate_tokens(text: str) -> list[str]:
    """Whitespace-delimited pieces: a tokenizer-free stand-in that never undercounts words.

    Subword tokenizers produce at least one token per word, so a message cut to
    N pieces here has at least N real tokens' worth of text; pass the model's
    own tokenizer to :class:`TokenBudgetCompactor` for exact budgets.
    """
    return _TOKEN_RE.findall(text)


@dataclass(frozen=True, slots=True)
class TokenBudgetCompactor:
    """Keep a message under ``max_tokens``: the conclusion's *last* tokens.

    The end is kept because that is where a solution states its answer. A cut
    message starts with ``marker`` so the next round can tell it is partial.
    """

    max_tokens: int
    tokenize: Callable[[str], list[str]] = field(default=approximate_tokens)
    inner: Compactor = field(default_factory=ConclusionCompactor)
    marker: str = "[...] "
    name: str = "budget"

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(
                f"max_tokens must be >= 1 for a token-budget compactor, got {self.max_tokens}"
            )

    def compact(self, trajectory: Trajectory) -> str:
        text = self.inner.compact(trajectory)
        pieces = self.tokenize(text)
        if len(pieces) <= self.max_tokens:
            return text
        return self.marker + "".join(pieces[-self.max_tokens :]).lstrip()


_BUILTIN: dict[str, Callable[[], Compactor]] = {
    "conclusion": ConclusionCompactor,
    "answer": AnswerCompactor,
}


def builtin_compactor(spec: str) -> Compactor | None:
    """A built-in compactor by name (``conclusion``, ``answer``, ``budget:N``), else None.

    Never imports anything: this is what names coming from a request (a served
    graph's per-run settings, ``pacore serve``) may resolve to, together with
    the names a deployment registers
    (:class:`~pacore_graph.values.compactor_registry.CompactorRegistry`).
    ValueError for a malformed ``budget:N``.
    """
    spec = spec.strip()
    if spec in _BUILTIN:
        return _BUILTIN[spec]()
    name, _, arg = spec.partition(":")
    if name in ("budget", "token-budget"):
        try:
            return TokenBudgetCompactor(max_tokens=int(arg))
        except ValueError:
            raise ValueError(
                f"compactor {spec[:80]!r}: expected budget:N with N a positive integer"
            ) from None
    return None


def compactor_from_name(spec: str) -> Compactor:
    """Resolve a builder or CLI name: ``conclusion``, ``answer``, ``budget:N`` or ``module:attr``.

    ``module:attr`` imports a user's compactor: a class or factory called with
    no arguments, or an object that already has ``compact``. It is for code and
    the operator's command line only; names from a request go through
    :func:`builtin_compactor` or a registry, which import nothing.
    """
    spec = spec.strip()
    builtin = builtin_compactor(spec)
    if builtin is not None:
        return builtin
    name, _, arg = spec.partition(":")
    if arg:
        module = importlib.import_module(name)
        obj = getattr(module, arg)
        candidate = obj if hasattr(obj, "compact") and not isinstance(obj, type) else obj()
        if not isinstance(candidate, Compactor):
            raise TypeError(f"compactor {spec!r} has no compact(trajectory) method and name")
        return candidate
    raise ValueError(
        f"unknown compactor {spec!r}; choose conclusion, answer, budget:N or module:attr"
    )
