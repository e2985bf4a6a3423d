"""The synthesis environment with the real ``verifiers`` package, against a scripted server.

One scripted server plays the policy and the judge, by input: the oracle for
the arithmetic problems, a fixed program for the code problems (right for
one, wrong for the other), a fixed answer for the judged ones, and the judge's
verdict for judge prompts. verifiers runs its own rollout loop (interception
server, harness, trace, ``@vf.reward``); each episode's reward must equal what
our graders give the same completion (math, code run in the sandbox, the
judge), and the completion must be the server's answer to that prompt.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from pacore_graph.eval.code_grader import CodeGrader
from pacore_graph.eval.judge import JudgeGrader
from pacore_graph.eval.math_grader import MathGrader
from pacore_graph.rl.recipe import RecipeConfig, build_trainset, load_pool, write_trainset
from pacore_graph.rl.rewards import PaCoReReward
from pacore_graph.rl.rows import write_jsonl
from pacore_graph.rl.verifiers_env import (
    TASKSET_ID,
    PaCoReSynthesisTask,
    evaluate,
    load_environment,
)
from pacore_graph.testing import ScriptedServer
from pacore_graph.testing.method_oracle import MethodOracle
from pacore_graph.testing.script import ScriptedReply, ScriptedRequest

SUM = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
ORACLE = MethodOracle()


def respond(request: ScriptedRequest) -> ScriptedReply | str:
    text = request.last_user
    if "[response]:" in text:  # the judge's prompt (HLE rubric): right if it names the answer
        response = text.split("[response]:")[1].split("Your judgement")[0]
        truth = text.split("[correct_answer]:")[1].split()[0]
        verdict = "yes" if truth in response else "no"
        return f"extracted_final_answer: x\nreasoning: compared\ncorrect: {verdict}\nconfidence: 90"
    if "Read two integers" in text:
        return ScriptedReply(content=f"Here is the program.\n{SUM}", reasoning="sum them")
    if "capital of" in text:
        return ScriptedReply(content="Answer: Paris", reasoning="recall")
    return ORACLE(request)


def _tests(output: str) -> dict[str, Any]:
    return {
        "code_tests": {
            "tests": [{"input": "2 3\n", "output": output, "testtype": "stdin", "public": True}],
            "fn_name": None,
            "starter_code": "",
            "time_limit_s": 6.0,
        }
    }


POOL = [
    {
        "id": "math-right",
        "conversation": [{"role": "user", "content": "What is 17 + 25?"}],
        "responses": ["So \\boxed{42}.", "So \\boxed{43}.", "So \\boxed{44}."],
        "ground_truth": "42",
        "category": "math",
    },
    {
        "id": "math-missing",
        "conversation": [{"role": "user", "content": "What is 50 + 98?"}],
        "responses": ["So \\boxed{149}.", "So \\boxed{150}.", "So \\boxed{151}."],
        "ground_truth": "148",
        "category": "math",
    },
    {
        "id": "code-sum",
        "conversation": [{"role": "user", "content": "Read two integers and print their sum."}],
        "responses": ["print(5)", "print(6)"],
        "ground_truth": _tests("5"),
        "category": "code",
    },
    {
        "id": "code-product",
        "conversation": [{"role": "user", "content": "Read two integers and print their product."}],
        "responses": ["print(6)", "print(5)"],
        "ground_truth": _tests("6"),
        "category": "code",
    },
    {
        "id": "judge-france",
        "conversation": [{"role": "user", "content": "Name the capital of France."}],
        "responses": ["Paris", "Lyon"],
        "ground_truth": {"answer": "Paris", "rubric": "hle"},
        "category": "judge",
    },
    {
        "id": "judge-peru",
        "conversation": [{"role": "user", "content": "Name the capital of Peru."}],
        "responses": ["Lima", "Cusco"],
        "ground_truth": {"answer": "Lima", "rubric": "hle"},
        "category": "judge",
    },
]
RECIPE = {"min_messages": 2, "max_messages": 3, "seed": 5, "stage1": False}


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(respond).run_in_thread() as srv:
        yield srv


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pool_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The math and judged problems with their pools (PaCoRe-Train format)."""
    records = [r for r in POOL if r["category"] != "code"]
    return _write(tmp_path_factory.mktemp("pool") / "pacore_train.jsonl", records)


@pytest.fixture(scope="module")
def trainset_file(pool_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every problem's synthesis prompt, as ``pacore trainset`` builds them.

    Code problems whose ground truth is tests only are built with the code
    grader (``pacore trainset --grader code``): by category the recipe keeps
    only problems with an answer to check the pool against.
    """
    folder = tmp_path_factory.mktemp("trainset")
    code = _write(folder / "code_pool.jsonl", [r for r in POOL if r["category"] == "code"])
    rows = [
        *build_trainset(load_pool([pool_file]), RecipeConfig(**RECIPE)).rows,
        *build_trainset(load_pool([code]), RecipeConfig(**RECIPE), grader=CodeGrader()).rows,
    ]
    write_jsonl(folder / "trainset.jsonl", rows)
    return folder / "trainset.jsonl"


@pytest.fixture(scope="module")
def episodes(server: ScriptedServer, trainset_file: Path) -> list[Any]:
    env = load_environment(
        str(trainset_file), judge_base_url=server.base_url, judge_model="judge-model"
    )
    return asyncio.run(
        evaluate(
            env, base_url=server.base_url, model="scripted", sampling={"seed": 3}, api_key_var="X"
        )
    )


def completion_of(trace: Any) -> dict[str, Any]:
    last = trace.assistant_messages[-1]
    return {
        "role": "assistant",
        "content": last.content,
        "reasoning_content": last.reasoning_content,
    }


def test_every_prompt_is_an_episode_with_one_graded_answer(episodes: list[Any]) -> None:
    assert len(episodes) == len(POOL)
    for episode in episodes:
        assert episode.ok, episode.errors
        (trace,) = episode.traces
        assert set(trace.rewards) == {"pacore_reward"}
        assert trace.task.data.prompt[-1].content.startswith("You are given a problem")


def test_rewards_are_what_our_graders_give_the_same_completions(
    episodes: list[Any], server: ScriptedServer
) -> None:
    judge = JudgeGrader(server.base_url, "judge-model", backoff_s=0.0)
    graders = {"math": MathGrader(), "code": CodeGrader(), "judge": judge}
    rewards = {}
    for episode in episodes:
        (trace,) = episode.traces
        data = trace.task.data
        prompt = [m.model_dump() for m in data.prompt]
        expected = PaCoReReward(grader=graders[data.category]).grade(
            [completion_of(trace)], data.ground_truth, data.category, prompt
        )
        assert trace.rewards["pacore_reward"].score == expected.score, data.problem_id
        rewards[data.problem_id] = expected.score
    # Each grader gave both verdicts, so the comparison above could have failed either way.
    assert rewards == {
        "math-right": 1.0,
        "math-missing": 0.0,
        "code-sum": 1.0,
        "code-product": 0.0,
        "judge-france": 1.0,
        "judge-peru": 0.0,
    }


def test_the_graded_completion_is_the_servers_answer_to_the_prompt(
    episodes: list[Any], server: ScriptedServer
) -> None:
    """By input: the same prompt and seed sent directly get the same reply."""
    sdk = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    for episode in episodes[:2]:
        (trace,) = episode.traces
        messages = [m.model_dump(exclude_none=True) for m in trace.task.data.prompt]
        direct = sdk.chat.completions.create(model="scripted", messages=messages, seed=3)
        assert trace.assistant_messages[-1].content == direct.choices[0].message.content


def test_a_trainset_on_disk_gives_the_same_prompts(pool_file: Path, tmp_path: Path) -> None:
    """``path=`` (what ``pacore trainset`` wrote) and ``pool=`` (built here) agree."""
    result = build_trainset(load_pool([pool_file]), RecipeConfig(**RECIPE))
    write_trainset(result, tmp_path / "trainset", "jsonl")
    from_disk = load_environment(str(tmp_path / "trainset"))
    from_pool = load_environment(pool=[str(pool_file)], **RECIPE)
    prompts = [t.data.prompt for t in from_disk.taskset]
    assert prompts == [t.data.prompt for t in from_pool.taskset]
    assert [[m.model_dump(exclude_none=True) for m in p] for p in prompts] == [
        r["prompt"] for r in result.rows
    ]
    assert all(isinstance(t, PaCoReSynthesisTask) for t in from_disk.taskset)


def test_bad_arguments_fail_before_any_rollout(pool_file: Path) -> None:
    with pytest.raises(ValueError, match="one"):
        list(load_environment().taskset)
    with pytest.raises(ValueError, match="unknown grader"):
        load_environment(pool=[str(pool_file)], grader="astrology")
    with pytest.raises(ValueError, match="judge_base_url"):
        load_environment(pool=[str(pool_file)], grader="judge")


def test_verifiers_loads_the_taskset_and_harness_by_id() -> None:
    import verifiers.v1 as vf

    from pacore_graph.rl import verifiers_env

    assert vf.load_taskset(verifiers_env.PaCoReSynthesisConfig(pool=["x"])).__class__.__name__ == (
        "PaCoReSynthesisTaskset"
    )
    assert vf.default_harness_id(TASKSET_ID) == TASKSET_ID
