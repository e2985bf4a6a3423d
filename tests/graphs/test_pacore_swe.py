"""The SWE PaCoRe graph over real HTTP, real subprocesses and the real sandbox.

The model is the scripted bug-fixer of ``examples/swe_fix_bug`` (its next step
is a function of the tool results so far) or a variant of it; everything else
is real: tool calls through ChatOpenAI, repository copies, sandboxed test runs,
diffs, and the final diff applied to a fresh copy and verified.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType

import pytest

from pacore_graph.cli import main
from pacore_graph.graphs.pacore_swe import SWECompactor, run_swe
from pacore_graph.llm.langchain_client import aclose_chat_model, make_chat_model
from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer, ScriptedToolCall

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "swe_fix_bug"
ISSUE = (EXAMPLE / "ISSUE.md").read_text()


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("swe_example", EXAMPLE / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EX = _example()

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
    return Path(shutil.copytree(EXAMPLE / "repo", tmp_path / "repo"))


async def _run(respond: object, repo: Path, rounds: list[int], **kwargs: object):  # type: ignore[no-untyped-def]
    async with ScriptedServer(respond, model="m") as srv:  # type: ignore[arg-type]
        chat = make_chat_model(srv.base_url, "m")
        try:
            outcome = await run_swe(
                chat, repo, ISSUE, "pytest -q", config=PaCoReConfig(rounds=rounds), **kwargs
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
    from pacore_graph.graph.records import Trajectory

    msg = SWECompactor().compact(Trajectory(round=0, index=0, content="<think>x</think>done"))
    assert "(no changes)" in msg and "Test result: not run" in msg and msg.endswith("done")


def test_pacore_swe_command(repo: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    diff_out = tmp_path / "fix.diff"
    with ScriptedServer(EX.scripted_fixer, model="m").run_in_thread() as srv:
        code = main(
            [
                "swe",
                "--repo",
                str(repo),
                "--issue",
                str(EXAMPLE / "ISSUE.md"),
                "--test",
                "pytest -q",
                "--rounds",
                "2",
                "--base-url",
                srv.base_url,
                "--model",
                "m",
                "--diff-out",
                str(diff_out),
                "--json",
            ]
        )
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["resolved"] is True and out["attempts_passing"] == 3
    assert diff_out.read_text() == out["diff"] and "sorted(values)" in out["diff"]
    assert (
        main(
            [
                "swe",
                "--repo",
                str(repo),
                "--issue",
                str(EXAMPLE / "ISSUE.md"),
                "--test",
                "pytest -q",
            ]
        )
        == 2
    )
    assert "tool-calling model" in capsys.readouterr().err


def test_swe_refuses_bad_arguments_before_any_model_call(
    repo: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Issue 11.8: these used to raise a traceback, ``--diff-out`` only after every model call."""
    (tmp_path / "a-directory").mkdir()
    bad_issue = tmp_path / "issue.bin"
    bad_issue.write_bytes(b"fix \xff this")
    cases = [
        (["--test", ""], "--test is empty"),
        (["--test", "   "], "--test is empty"),
        (["--test", "pytest -q", "--diff-out", str(tmp_path / "a-directory")], "is a directory"),
        (["--test", "pytest -q", "--diff-out", str(tmp_path / "no" / "x.diff")], "not a dir"),
        (["--test", "pytest -q", "--issue", str(bad_issue)], "UTF-8"),
        (["--test", "pytest -q", "--repo", "/"], "refused"),
        (["--test", "pytest -q", "--repo", str(tmp_path / "missing")], "not a directory"),
    ]
    with ScriptedServer(EX.scripted_fixer, model="m").run_in_thread() as srv:
        for extra, message in cases:
            args = ["swe", "--base-url", srv.base_url, "--model", "m"]
            if "--issue" not in extra:
                args += ["--issue", str(EXAMPLE / "ISSUE.md")]
            if "--repo" not in extra:
                args += ["--repo", str(repo)]
            assert main([*args, *extra]) == 2, extra
            err = capsys.readouterr().err.strip()
            assert err.startswith("pacore: error:") and message in err and "\n" not in err
        assert list(srv.requests) == []


def test_swe_lists_only_flags_that_do_something_there(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["swe", "--help"])
    text = capsys.readouterr().out
    for useless in ("--compactor", "--client", "--no-batch", "--logprobs", "--token-ids"):
        assert useless not in text
    for useful in ("--base-url", "--temperature", "--max-tokens", "--retries", "--diff-out"):
        assert useful in text
