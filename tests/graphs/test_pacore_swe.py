"""The SWE PaCoRe graph over real HTTP, real subprocesses and the real sandbox.

The model is the scripted bug-fixer of ``examples/swe_fix_bug`` (its next step
is a function of the tool results so far) or a variant of it; everything else
is real: tool calls through ChatOpenAI, repository copies, sandboxed test runs,
diffs, and the final diff applied to a fresh copy and verified.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from swe_support import EX, ISSUE, TEST_COMMAND, example_repo

from pacore_graph.graphs.pacore_swe import SWECompactor, run_swe
from pacore_graph.llm.langchain_client import aclose_chat_model, make_chat_model
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer, ScriptedToolCall

HALF_FIX = EX.FIXED_STATS.replace(
    "    if len(ordered) % 2:\n        return ordered[middle]\n"
    "    return (ordered[middle - 1] + ordered[middle]) / 2\n",
    "    return ordered[middle]\n",
)


def half_fixer(request: ScriptedRequest) -> ScriptedReply:
    """Sorts but forgets even lengths: its attempts fail the tests."""
    done = [m for m in request.messages if m.get("role") == "tool"]
    if not done:
        return ScriptedReply(
            content="",
            tool_calls=(
                ScriptedToolCall(
                    name="write_file", arguments={"path": "statkit/stats.py", "content": HALF_FIX}
                ),
            ),
        )
    if len(done) == 1:
        return ScriptedReply(content="", tool_calls=(ScriptedToolCall(name="run_tests"),))
    return ScriptedReply(content="Sorted the input.")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return example_repo(tmp_path)


async def _run(respond: object, repo: Path, rounds: list[int], **kwargs: object):  # type: ignore[no-untyped-def]
    async with ScriptedServer(respond, model="m") as srv:  # type: ignore[arg-type]
        chat = make_chat_model(srv.base_url, "m")
        try:
            outcome = await run_swe(
                chat, repo, ISSUE, TEST_COMMAND, config=PaCoReConfig(rounds=rounds), **kwargs
            )
        finally:
            await aclose_chat_model(chat)
        return outcome, list(srv.requests)


async def test_scripted_fixer_resolves_the_issue(repo: Path) -> None:
    before = (repo / "statkit" / "stats.py").read_text()
    outcome, requests = await _run(EX.scripted_fixer, repo, [2])
    assert outcome.resolved and outcome.applied and outcome.tests_passed
    assert "+    ordered = sorted(values)" in outcome.diff
    assert "5 passed" in outcome.test_output
    # Every explorer read, wrote and tested in its own copy; the original is untouched.
    assert (repo / "statkit" / "stats.py").read_text() == before
    for t in outcome.result.trajectories:
        assert [c.name for c in t.tool_calls] == ["read_file", "write_file", "run_tests"]
        assert "def median" in t.tool_calls[0].output
        assert "passed" in t.tool_calls[2].output
        assert t.artifacts["tests_passed"] is True
        assert t.artifacts["files_changed"] == ["statkit/stats.py"]
        assert t.completion_tokens > 0
    # The compacted message is the diff and the test outcome, not the transcript.
    first = outcome.result.rounds[0][0]
    assert first.message is not None
    assert first.message.startswith("Proposed diff:\n```diff\ndiff --git a/statkit/stats.py")
    assert "Test result: PASSED" in first.message
    assert "def mean" not in first.message  # the read_file output is not passed on
    # The final round's prompt carried both attempts' diffs as references.
    final_prompts = [
        json.dumps(r.body["messages"]) for r in requests if "Reference 2:" in json.dumps(r.body)
    ]
    assert final_prompts and all("Proposed diff" in p for p in final_prompts)


async def test_failing_attempts_are_reported_and_not_resolved(repo: Path) -> None:
    outcome, _ = await _run(half_fixer, repo, [2])
    assert outcome.applied and not outcome.tests_passed and not outcome.resolved
    assert all(t.artifacts["tests_passed"] is False for t in outcome.result.trajectories)
    assert "FAILED" in outcome.test_output or "failed" in outcome.test_output
    assert "Test result: FAILED" in (outcome.result.rounds[0][0].message or "")


async def test_a_model_that_changes_nothing_gives_an_empty_diff(repo: Path) -> None:
    outcome, _ = await _run(lambda r: "I cannot fix this.", repo, [1])
    assert outcome.diff == ""
    assert not outcome.applied and outcome.apply_message == "empty diff"
    assert not outcome.resolved


async def test_tool_loop_is_bounded_and_unknown_tools_are_reported(repo: Path) -> None:
    def looping(request: ScriptedRequest) -> ScriptedReply:
        return ScriptedReply(content="", tool_calls=(ScriptedToolCall(name="teleport"),))

    outcome, requests = await _run(looping, repo, [1], max_steps=3)
    for t in outcome.result.trajectories:
        assert len(t.tool_calls) == 3
        assert all(c.error == "unknown tool 'teleport'" for c in t.tool_calls)
        assert t.finish_reason == "length" and t.truncated
    assert len(requests) == 3 * 2  # max_steps model calls for each of the 2 explorers


def test_swe_compactor_on_a_trajectory_without_artifacts() -> None:
    from pacore_graph.values.records import Trajectory

    msg = SWECompactor().compact(Trajectory(round=0, index=0, content="<think>x</think>done"))
    assert "(no changes)" in msg and "Test result: not run" in msg and msg.endswith("done")
