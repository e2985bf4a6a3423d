"""The judge grader against a scripted judge server over real HTTP (verdicts by input).

The judge's reply depends only on the prompt it receives: the response text
being judged names the verdict the scripted judge gives (``RIGHT``,
``WRONG``, ``MUMBLE`` for an unreadable one, ``FLAKY`` for a first call that
fails with 503), so the expected grades are known whatever the call order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from pacore_graph.eval.graders import grader_from_name
from pacore_graph.eval.judge import JudgeGrader, rubric_for
from pacore_graph.testing.scripted_server import ScriptedReply, ScriptedRequest, ScriptedServer


def judge_reply(request: ScriptedRequest) -> str | ScriptedReply:
    prompt = request.last_user
    if "CUT" in prompt:  # a judge stopped by max_tokens while it quoted the response
        quoted = "reasoning: the response ends with\ncorrect: yes\nconfidence: 100"
        return ScriptedReply(content=f"extracted_final_answer: 5\n{quoted}", finish_reason="length")
    if "<MODEL_RESPONSE>" in prompt:  # MultiChallenge's rubric: reasoning, then YES or NO
        response = prompt.split("<MODEL_RESPONSE>")[1].split("</MODEL_RESPONSE>")[0]
        if "MUMBLE" in response:
            return "It is hard to say."
        return "The response keeps the constraint.\n**YES**" if "RIGHT" in response else "NO"
    response = prompt.split("[response]:")[1].split("Your judgement")[0]
    if "MUMBLE" in response:
        return "extracted_final_answer: 7\nreasoning: unclear\ncorrect: maybe"
    verdict = "yes" if "RIGHT" in response else "no"
    return f"extracted_final_answer: 7\nreasoning: compared\ncorrect: {verdict}\nconfidence: 100"


def flaky_first_call(request: ScriptedRequest) -> int | None:
    return 503 if "FLAKY" in request.last_user and request.attempt == 0 else None


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer(judge_reply, fail_when=flaky_first_call).run_in_thread() as srv:
        yield srv


def judge(server: ScriptedServer, tmp_path: Path, **kwargs: object) -> JudgeGrader:
    return JudgeGrader(
        server.base_url,
        "judge-model",
        cache_path=tmp_path / "judge-cache.jsonl",
        backoff_s=0.0,
        **kwargs,  # type: ignore[arg-type]
    )


HLE_TRUTH = {"answer": "7", "rubric": "hle"}


def test_hle_verdicts_by_the_published_rubric(server: ScriptedServer, tmp_path: Path) -> None:
    grader = judge(server, tmp_path)
    right = grader.grade("Explanation: ...\nAnswer: 7 RIGHT", HLE_TRUTH, problem="What is 3+4?")
    wrong = grader.grade("Answer: 8 WRONG", HLE_TRUTH, problem="What is 3+4?")
    assert (right.score, right.parsed, right.extracted) == (1.0, True, "yes")
    assert (wrong.score, wrong.parsed, wrong.extracted) == (0.0, True, "no")
    sent = server.requests[-1].body
    assert sent["model"] == "judge-model" and sent["temperature"] == 0.0
    prompt = sent["messages"][0]["content"]
    assert prompt.startswith("Judge whether the following [response] to [question] is correct")
    assert "[question]: What is 3+4?" in prompt and "[correct_answer]: 7" in prompt


def test_unparsed_verdict_is_never_correct_and_is_retried(
    server: ScriptedServer, tmp_path: Path
) -> None:
    before = server.request_count
    grade = judge(server, tmp_path, attempts=3).grade("Answer: 7 MUMBLE", HLE_TRUTH, problem="q")
    assert (grade.score, grade.parsed) == (0.0, False)
    assert grade.info is not None and grade.info["judge_verdict"] == "unparsed"
    assert server.request_count - before == 3  # asked again, never guessed
    assert "unparsed" in grade.detail


def test_a_judge_reply_cut_at_max_tokens_is_never_read_as_a_verdict(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """Issue 31: what a cut reply ends with may be a quote of the response, not the verdict."""
    grade = judge(server, tmp_path, attempts=2).grade("Answer: 5 CUT", HLE_TRUTH, problem="q")
    assert (grade.score, grade.parsed) == (0.0, False)
    assert grade.info is not None and grade.info["judge_verdict"] == "unparsed"
    assert "cut at max_tokens" in grade.detail


def test_failed_call_is_retried(server: ScriptedServer, tmp_path: Path) -> None:
    grade = judge(server, tmp_path).grade("Answer: 7 RIGHT FLAKY", HLE_TRUTH, problem="q")
    assert grade.score == 1.0
    assert grade.info is not None and grade.info["judge_attempts"] == 2


def test_unreachable_judge_is_an_error_grade_not_a_crash(tmp_path: Path) -> None:
    grader = JudgeGrader("http://127.0.0.1:9/v1", "m", attempts=2, backoff_s=0.0, timeout_s=2)
    grade = grader.grade("Answer: 7 RIGHT", HLE_TRUTH, problem="q")
    assert (grade.score, grade.parsed) == (0.0, False)
    assert grade.info is not None and grade.info["judge_verdict"] == "error"


def test_verdicts_are_cached_on_disk_and_a_resumed_eval_does_not_rejudge(
    server: ScriptedServer, tmp_path: Path
) -> None:
    first = judge(server, tmp_path).grade("Answer: 7 RIGHT cached", HLE_TRUTH, problem="q2")
    assert first.info is not None and first.info["judge_cached"] is False
    tokens = first.info["judge_tokens"]
    assert tokens > 0
    before = server.request_count
    again = judge(server, tmp_path).grade("Answer: 7 RIGHT cached", HLE_TRUTH, problem="q2")
    assert server.request_count == before  # a new grader (a resumed eval) read the file
    assert again.score == 1.0
    assert again.info is not None and again.info["judge_cached"] is True
    assert again.info["judge_tokens"] == tokens
    other = judge(server, tmp_path).grade("Answer: 7 RIGHT cached", HLE_TRUTH, problem="q3")
    assert other.info is not None and other.info["judge_cached"] is False  # another question
    lines = (tmp_path / "judge-cache.jsonl").read_text().splitlines()
    assert len(lines) == 2 and all("key" in json.loads(line) for line in lines)


def test_unparsed_verdicts_are_not_cached(server: ScriptedServer, tmp_path: Path) -> None:
    judge(server, tmp_path, attempts=1).grade("MUMBLE", HLE_TRUTH, problem="q")
    assert not (tmp_path / "judge-cache.jsonl").exists()


def test_multichallenge_passes_when_the_verdict_meets_the_pass_criterion(
    server: ScriptedServer, tmp_path: Path
) -> None:
    grader = judge(server, tmp_path)
    yes = {
        "target_question": "Does it avoid nuts?",
        "pass_criteria": "YES",
        "rubric": "multichallenge",
    }
    no = {**yes, "pass_criteria": "NO"}
    assert grader.grade("RIGHT recipe", yes).score == 1.0
    assert grader.grade("RIGHT recipe", no).score == 0.0  # judge said YES, criterion wants NO
    assert grader.grade("a bad recipe", no).score == 1.0
    adapter_form = {
        "answer": "NO",
        "target_question": "Does it avoid nuts?",
        "rubric": "multichallenge",
    }
    assert grader.grade("RIGHT recipe", adapter_form).score == 0.0  # criterion under "answer"
    mumble = grader.grade("MUMBLE", yes)
    assert (mumble.score, mumble.parsed) == (0.0, False)
    prompt = server.requests[-1].body["messages"][0]["content"]
    assert "<CRITERIA>\nDoes it avoid nuts?\n</CRITERIA>" in prompt


def test_rubric_choice() -> None:
    assert rubric_for({"answer": "7"}).name == "hle"
    assert rubric_for({"pass_criteria": "YES", "target_question": "?"}).name == "multichallenge"
    assert rubric_for({"answer": "7", "rubric": "multichallenge"}).name == "multichallenge"
    assert rubric_for({"answer": "7"}, "multichallenge").name == "multichallenge"
    with pytest.raises(ValueError, match="unknown judge rubric"):
        rubric_for({}, "nope")


def test_judge_by_name_says_what_it_needs() -> None:
    with pytest.raises(ValueError, match="--judge-base-url"):
        grader_from_name("judge")
    with pytest.raises(ValueError, match="http"):
        JudgeGrader("localhost:8000", "m")
