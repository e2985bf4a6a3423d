"""One answer extractor: restatements and junk are no answers; equivalent answers vote together.

The cases come from a real export against vLLM serving SmolLM2 on this CPU:
the model wrote "...the original 54-6 is...", math-verify read ``54-6``,
evaluated it to 48 and matched the ground truth. Five of six rewarded
episodes were such restatements; ``editoned`` was counted as parsed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pacore_graph.eval.datasets import write_jsonl
from pacore_graph.eval.graders import (
    ExactGrader,
    Grade,
    MathGrader,
    NumericGrader,
    grade_response,
)
from pacore_graph.eval.harness import run_eval
from pacore_graph.eval.methods import parse_methods
from pacore_graph.llm.client import OpenAICompatClient
from pacore_graph.rl.rewards import PaCoReReward
from pacore_graph.runs.runner import read_dataset
from pacore_graph.settings.config import ModelRetryPolicy, PaCoReConfig
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer
from pacore_graph.values.aggregation import MajorityVote, extract_final_answer
from pacore_graph.values.answers import (
    answers_equivalent,
    extract_answer,
    is_restatement,
    problem_text,
)
from pacore_graph.values.compaction import AnswerCompactor
from pacore_graph.values.records import Trajectory

# (problem, response, ground truth, the expression the response restates)
RESTATEMENTS = [
    ("What is 54 - 6?", "Hmm, so the original 54-6 is what we need to work out.", "48", "54-6"),
    ("Compute 50 + 98.", "We look at 50 + 98 again and think about it.", "148", "50 + 98"),
    ("What is 28 + 65?", "I think the task 28+65 is an addition problem", "93", "28+65"),
    ("Compute 18 - 37.", "Note that 18 - 37 is a subtraction", "-19", "18 - 37"),
]


@pytest.fixture(scope="module")
def math_grader() -> MathGrader:
    return MathGrader()


# --------------------------------------------------------------------------- extraction


@pytest.mark.parametrize(
    ("text", "text_answer", "source"),
    [
        (r"<think>\boxed{1}</think>So \boxed{2}. Then 7.", "2", "boxed"),
        ("Working... The final answer is 48.", "48", "stated"),
        ("**Final Answer:** $\\frac{1}{2}$", "\\frac{1}{2}", "stated"),
        ("Answer: Paris", "Paris", "stated"),
        ("so 54 - 6 = 48", "48", "number"),
        ("the share is 3/4", "3/4", "number"),
        ("Some words\n\nYes\n", "Yes", "line"),
    ],
)
def test_extract_answer_sources(text: str, text_answer: str, source: str) -> None:
    answer = extract_answer(text)
    assert answer is not None
    assert (answer.text, answer.source) == (text_answer, source)


@pytest.mark.parametrize(
    "text",
    [
        r"So \boxed{}",  # an empty box states no answer, whatever follows
        "the original 54-6 is the thing",  # only an unevaluated expression
        r"\boxed{$.$}",  # junk: nothing to read
        "<think>the answer is 5</think>",
    ],
)
def test_no_answer(text: str) -> None:
    assert extract_answer(text) is None
    assert extract_final_answer(text) is None


@pytest.mark.parametrize(("problem", "response", "_truth", "expression"), RESTATEMENTS)
def test_a_restated_expression_is_never_an_answer(
    problem: str, response: str, _truth: str, expression: str
) -> None:
    assert extract_answer(response, problem=problem) is None
    assert extract_answer(response) is None  # unboxed expressions are never a fallback answer
    # Boxed or stated and restated: still the question, not its answer.
    assert extract_answer(rf"\boxed{{{expression}}}", problem=problem) is None
    assert extract_answer(f"The answer is {expression}.", problem=problem) is None
    assert extract_answer(rf"\boxed{{{expression}}}") is not None  # no problem: cannot tell


def test_restatement_needs_an_expression_from_the_problem() -> None:
    problem = "What is 54 - 6?"
    assert is_restatement("54-6", problem)
    assert is_restatement("$54 - 6$", problem)
    assert not is_restatement("48", problem)  # a number is an answer, even one in the problem
    assert not is_restatement("6-54", problem)
    assert not is_restatement("54-6", "What is 7 times 8?")
    assert is_restatement(r"3 \times 4", "Compute 3 × 4.")


def test_problem_text_reads_the_last_user_message() -> None:
    convo = [{"role": "system", "content": "s"}, {"role": "user", "content": "What is 2+2?"}]
    assert problem_text(convo) == "What is 2+2?"
    assert problem_text("plain") == "plain"
    assert problem_text(None) is None


# --------------------------------------------------------------------------- graders


@pytest.mark.parametrize(("problem", "response", "truth", "expression"), RESTATEMENTS)
def test_math_grader_does_not_reward_a_restated_question(
    math_grader: MathGrader, problem: str, response: str, truth: str, expression: str
) -> None:
    # Before: math-verify read the expression, evaluated it and matched the truth.
    grade = math_grader.grade(response, truth, problem=problem)
    assert (grade.score, grade.parsed) == (0.0, False)
    assert "expression" in grade.detail
    # Without the problem the unboxed expression is still no answer.
    assert math_grader.grade(response, truth).score == 0.0
    boxed = math_grader.grade(rf"\boxed{{{expression}}}", truth)
    assert boxed.score == 1.0  # no problem given: a boxed expression is taken as written
    restated = math_grader.grade(rf"\boxed{{{expression}}}", truth, problem=problem)
    assert (restated.score, restated.parsed) == (0.0, False)
    assert "restates" in restated.detail


def test_math_grader_still_reads_a_worked_answer(math_grader: MathGrader) -> None:
    problem = "What is 54 - 6?"
    assert math_grader.grade("54 - 6 = 48", "48", problem=problem).score == 1.0
    assert math_grader.grade("The answer is 48.", "48", problem=problem).score == 1.0
    assert math_grader.grade(r"so \boxed{48}", "48", problem=problem).score == 1.0


def test_junk_is_unparsed_not_an_answer(math_grader: MathGrader) -> None:
    for response in (r"\boxed{editoned}", "The answer is editoned.", "editoned"):
        grade = math_grader.grade(response, "48")
        assert (grade.score, grade.parsed, grade.extracted) == (0.0, False, None), response
    # A word that is the ground truth is still right (text answers).
    assert math_grader.grade(r"\boxed{\text{Box B}}", "Box B").score == 1.0
    assert math_grader.grade(r"\boxed{none}", "none").score == 1.0


def test_numeric_and_exact_graders_use_the_same_rule() -> None:
    problem = "What is 54 - 6?"
    numeric = NumericGrader().grade("the original 54-6 is unclear", "6", problem=problem)
    assert (numeric.score, numeric.parsed) == (0.0, False)
    assert NumericGrader().grade("pages 3-4", "4").score == 1.0  # no problem: a range
    exact = ExactGrader().grade(r"\boxed{54-6}", "54-6", problem=problem)
    assert exact.parsed is False
    assert ExactGrader().grade("The answer is Paris.", "paris").score == 1.0


def test_grade_response_leaves_problem_out_for_old_style_graders() -> None:
    class OldStyle:
        name = "old"

        def grade(self, response: str, ground_truth: object) -> Grade:
            return Grade(1.0 if response == "ok" else 0.0, True)

    assert grade_response(OldStyle(), "ok", "x", problem="p").score == 1.0
    assert grade_response(MathGrader(), "the original 54-6 is", "48", "What is 54-6?").score == 0


# --------------------------------------------------------------------------- voting


def test_equivalent_answers_vote_together() -> None:
    assert answers_equivalent("0.5", "1/2")
    assert answers_equivalent("1/2", "\\frac{1}{2}")
    assert answers_equivalent("1,000", "1000")
    assert not answers_equivalent("0.5", "0.25")
    assert not answers_equivalent("2^{10^{10}}", "3")  # never evaluated: compared as text

    def traj(i: int, content: str) -> Trajectory:
        return Trajectory(round=0, index=i, content=content, message=f"m{i}")

    round0 = [
        traj(0, r"\boxed{0.25}"),
        traj(1, r"\boxed{0.5}"),
        traj(2, "The answer is 1/2."),
        traj(3, r"\boxed{\frac{1}{2}}"),
        traj(4, r"\boxed{1/4}"),
    ]
    verdict = MajorityVote().aggregate([round0])
    assert verdict.details["votes"] == {"0.25": 2, "0.5": 3}
    assert verdict.details["winner"] == "0.5"
    assert verdict.trajectory.index == 1


def test_restatements_do_not_vote() -> None:
    round0 = [
        Trajectory(round=0, index=0, content="the original 54-6 is", message="a"),
        Trajectory(round=0, index=1, content="so 54-6 is hard", message="b"),
        Trajectory(round=0, index=2, content="It is 48.", message="c"),
    ]
    verdict = MajorityVote().aggregate([round0])
    assert verdict.details["votes"] == {"48": 1}
    assert verdict.trajectory.index == 2


def test_answer_compactor_and_rewards_share_the_rule() -> None:
    t = Trajectory(round=0, index=0, content="<think>x</think>Thus the final answer is 1/2.")
    assert AnswerCompactor().compact(t) == "1/2"
    reward = PaCoReReward(grader="math")
    prompts = [[{"role": "user", "content": "What is 54 - 6?"}]] * 3
    completions = [
        [{"role": "assistant", "content": "So the original 54-6 is the task."}],
        [{"role": "assistant", "content": "54 - 6 = 48"}],
        [{"role": "assistant", "content": r"\boxed{editoned}"}],
    ]
    rewards = reward(prompts=prompts, completions=completions, ground_truth=["48"] * 3)
    assert rewards == [0.0, 1.0, 0.0]


# --------------------------------------------------------------------------- eval over HTTP


async def test_eval_scores_a_restating_model_zero(tmp_path: Path) -> None:
    """A model that only restates the question scored 12.5% before; the truth is 0%."""
    problems = [
        {"id": f"p{i}", "messages": [{"role": "user", "content": q}], "ground_truth": {"answer": a}}
        for i, (q, _, a, _) in enumerate(RESTATEMENTS)
    ]
    by_question = {q: r for q, r, _, _ in RESTATEMENTS}

    def respond(req: ScriptedRequest) -> ScriptedReply:
        question = next(q for q in by_question if q in req.last_user)
        return ScriptedReply(content=by_question[question], reasoning="thinking")

    path = tmp_path / "problems.jsonl"
    write_jsonl(problems, path)
    records, errors = read_dataset(path)
    assert errors == []
    retry = ModelRetryPolicy(max_attempts=1)
    async with ScriptedServer(respond) as srv:
        client = OpenAICompatClient(srv.base_url, "scripted", retry=retry)
        try:
            await run_eval(
                records,
                parse_methods("single"),
                client,
                config=PaCoReConfig(retry=retry),
                out_dir=tmp_path / "out",
                progress=False,
            )
        finally:
            await client.aclose()
    lines = [json.loads(x) for x in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    graded = [x for x in lines if "score" in x]
    assert len(graded) == 4
    assert all(x["score"] == 0.0 and x["parsed"] is False for x in graded)
