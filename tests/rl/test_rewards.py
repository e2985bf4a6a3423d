"""The PaCoRe reward as TRL calls it: the grader's score of the compacted message."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from pacore_graph.eval.graders import ChoiceGrader, MathGrader
from pacore_graph.rl.rewards import PaCoReReward, completion_trajectory, encode_ground_truth


def test_reward_is_one_for_right_and_zero_for_wrong_like_the_grader() -> None:
    reward = PaCoReReward()  # conclusion compactor, grader by category (math)
    truth = encode_ground_truth({"answer": "42"})
    completions = [
        "<think>6 * 7 = 42</think>The answer is \\boxed{42}.",  # right
        "<think>6 * 7 = 41?</think>The answer is \\boxed{41}.",  # wrong
        "<think>first \\boxed{42}, then I changed my mind</think>So \\boxed{41}.",  # revised
        [{"role": "assistant", "content": "\\boxed{42}", "reasoning_content": "6*7"}],
        [{"role": "assistant", "content": "<think>\\boxed{42}</think>no idea"}],
    ]
    got = reward(prompts=["p"] * 5, completions=completions, ground_truth=[truth] * 5)
    assert got == [1.0, 0.0, 0.0, 1.0, 0.0]
    grader = MathGrader()
    for completion, score in zip(completions, got, strict=True):
        message = reward.message(completion)
        assert score == grader.grade(message, {"answer": "42"}).score
    assert reward.message(completions[2]) == "So \\boxed{41}."  # graded after </think>


def test_reward_uses_row_columns_like_trl_passes_them() -> None:
    logged: dict[str, list[Any]] = {}
    reward = PaCoReReward()
    got = reward(
        prompts=[[{"role": "user", "content": "q"}]] * 4,
        completions=["The answer is (B).", "The answer is (C).", "\\boxed{7}", "\\boxed{7}"],
        completion_ids=[[1], [2], [3], [4]],
        ground_truth=['"B"', '"B"', "7", None],
        category=["choice", "choice", None, "math"],
        problem_id=["a", "a", "b", "c"],
        trainer_state=object(),
        log_extra=lambda column, values: logged.setdefault(column, values),
    )
    assert got == [1.0, 0.0, 1.0, None]  # None: no ground truth, TRL skips the reward
    assert logged == {"pacore_extracted": ["B", "C", "7", None]}
    assert ChoiceGrader().grade("The answer is (B).", "B").score == 1.0
    assert reward.__name__ == "pacore_reward"
    with pytest.raises(ValueError, match="3 ground_truth"):
        reward(completions=["a", "b"], ground_truth=["1", "2", "3"])


def test_reward_with_other_compactor_and_grader_pickles() -> None:
    reward = PaCoReReward(compactor="answer", grader="numeric")
    again = pickle.loads(pickle.dumps(reward))
    completions = ["Work: 3 + 4 = 7, so\n\\boxed{7}", "I think 8"]
    assert again(completions=completions, ground_truth=["7", "7"]) == [1.0, 0.0]
    assert again.message(completions[0]) == "\\boxed{7}"
    assert completion_trajectory([{"role": "user", "content": "x"}]).content == ""
