"""Built-in compactors and the name registry."""

from __future__ import annotations

import pytest

from pacore_graph.values.compaction import (
    AnswerCompactor,
    Compactor,
    ConclusionCompactor,
    TokenBudgetCompactor,
    compactor_from_name,
    extract_boxed,
)
from pacore_graph.values.records import Trajectory


def traj(content: str, reasoning: str | None = None) -> Trajectory:
    return Trajectory(round=0, index=0, content=content, reasoning=reasoning)


def test_conclusion_keeps_text_after_the_last_think_close() -> None:
    c = ConclusionCompactor()
    assert c.compact(traj("<think>a</think>mid</think> final")) == " final"
    assert c.compact(traj("no think tags at all")) == "no think tags at all"
    # Reasoning returned in its own field: content already is the conclusion.
    assert c.compact(traj("The answer is 4.", reasoning="long thoughts")) == "The answer is 4."


def test_answer_compactor_prefers_the_last_boxed() -> None:
    c = AnswerCompactor()
    assert c.compact(traj(r"<think>\boxed{1}</think>so \boxed{2} then \boxed{\frac{1}{2}}")) == (
        r"\boxed{\frac{1}{2}}"
    )
    # A stated answer is the answer (the shared extractor's rule), else the last line.
    assert c.compact(traj("<think>x</think>Line one\nThe answer is 7\n\n")) == "7"
    assert c.compact(traj("<think>x</think>Line one\nParis\n\n")) == "Paris"
    assert c.compact(traj(r"So \boxed{}")) == ""  # an empty box states no answer
    assert c.compact(traj("")) == ""


def test_extract_boxed_balances_braces() -> None:
    assert extract_boxed(r"\boxed{a{b}c} and \fbox{ d }") == ["a{b}c", "d"]
    assert extract_boxed(r"\boxed{unclosed") == []


def test_token_budget_keeps_the_end_under_budget() -> None:
    c = TokenBudgetCompactor(max_tokens=3)
    assert c.compact(traj("<think>t</think>one two")) == "one two"
    out = c.compact(traj("<think>t</think>w1 w2 w3 w4 w5"))
    assert out == "[...] w3 w4 w5"
    with pytest.raises(ValueError, match="max_tokens"):
        TokenBudgetCompactor(max_tokens=0)


def test_budget_with_a_real_tokenizer_callable() -> None:
    c = TokenBudgetCompactor(max_tokens=4, tokenize=list)  # one token per character
    assert c.compact(traj("abcdefgh")) == "[...] efgh"


def test_names_resolve_and_unknown_names_fail_clearly() -> None:
    assert isinstance(compactor_from_name("conclusion"), ConclusionCompactor)
    assert isinstance(compactor_from_name("answer"), AnswerCompactor)
    budget = compactor_from_name("budget:64")
    assert isinstance(budget, TokenBudgetCompactor) and budget.max_tokens == 64
    imported = compactor_from_name("pacore_graph.values.compaction:AnswerCompactor")
    assert isinstance(imported, AnswerCompactor)
    with pytest.raises(ValueError, match="unknown compactor"):
        compactor_from_name("summary")
    with pytest.raises(ValueError, match="budget:N"):
        compactor_from_name("budget:lots")
    for c in (ConclusionCompactor(), AnswerCompactor(), TokenBudgetCompactor(max_tokens=2)):
        assert isinstance(c, Compactor)


def test_the_default_compactor_is_the_papers() -> None:
    """``DEFAULT_COMPACTOR`` (every ``compactor=`` default) names the conclusion compactor."""
    from pacore_graph.values.compaction import DEFAULT_COMPACTOR

    assert isinstance(compactor_from_name(DEFAULT_COMPACTOR), ConclusionCompactor)
    assert ConclusionCompactor().name == DEFAULT_COMPACTOR
