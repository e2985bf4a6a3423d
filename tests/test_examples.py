"""The examples run as a user would run them, against a local scripted server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from otlp_receiver import Receiver

from pacore_graph.testing import ScriptedReply, ScriptedRequest, ScriptedServer, ScriptedToolCall

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_compose_into_larger_graph() -> None:
    with ScriptedServer(model="m").run_in_thread() as srv:
        proc = run_example(
            "compose_into_larger_graph.py",
            "--base-url",
            srv.base_url,
            "--model",
            "m",
            "What is seventeen plus twenty five?",
        )
        requests = len(srv.requests)
    assert proc.returncode == 0, proc.stderr
    assert "answered by the hard path" in proc.stdout
    assert "conversation: ['human', 'ai']" in proc.stdout
    assert requests == 2  # one n=4 request, then the final round


def test_trace_to_jaeger_sends_spans(receiver: Receiver) -> None:
    with ScriptedServer(model="m").run_in_thread() as srv:
        proc = run_example(
            "trace_to_jaeger.py",
            "--base-url",
            srv.base_url,
            "--model",
            "m",
            "--endpoint",
            f"{receiver.url}/v1/traces",
        )
    assert proc.returncode == 0, proc.stderr
    names = [s["name"] for s in receiver.spans()]
    assert names.count("chat m") == 4 + 2 + 1
    assert "invoke_workflow pacore" in names


def test_custom_explorer_draft_then_check() -> None:
    with ScriptedServer(model="m").run_in_thread() as srv:
        proc = run_example("custom_explorer.py", "--base-url", srv.base_url, "--model", "m")
        requests = list(srv.requests)
    assert proc.returncode == 0, proc.stderr
    # The xray drawing shows the explorer subgraph's two nodes inside explore.
    assert "draft(draft)" in proc.stdout and "check(check)" in proc.stdout
    assert "explorer steps streamed: 4 draft, 4 check" in proc.stdout  # 3 + final 1
    assert "rounds: [3, 1]" in proc.stdout
    # Two calls per explorer; the second carries the draft to check.
    assert len(requests) == 2 * (3 + 1)
    checks = [r for r in requests if "Here is a draft answer" in r.body["messages"][-1]["content"]]
    assert len(checks) == 4
    assert all(r.body["max_tokens"] == 128 for r in requests)


def answers_42(req: ScriptedRequest) -> ScriptedReply:
    return ScriptedReply(content=f"{req.model} says: the answer is 42.", completion_tokens=6)


def test_per_round_models_small_explores_large_synthesises() -> None:
    with ScriptedServer(answers_42, model="m").run_in_thread() as srv:
        proc = run_example(
            "per_round_models.py",
            *("--base-url", srv.base_url, "--model", "m", "--small", "s", "--large", "l"),
        )
        sent = [(r.body["model"], r.body["temperature"], r.body.get("n", 1)) for r in srv.requests]
    assert proc.returncode == 0, proc.stderr
    assert sent == [("s", 1.0, 4), ("s", 0.8, 2), ("l", 0.2, 1)]  # one request per round
    assert "round 0: 4 x s at temperature 1.0" in proc.stdout
    assert "round 2: 1 x l at temperature 0.2" in proc.stdout
    assert "answer: l says: the answer is 42." in proc.stdout


def calculator_agent(req: ScriptedRequest) -> ScriptedReply:
    """Ask the calculator, then answer with what it said (the synthesis answers directly)."""
    tools = [m for m in req.messages if m.get("role") == "tool"]
    if "Reference Responses" in req.last_user:
        return ScriptedReply(content="All three agree: 42.", completion_tokens=5)
    if not tools:
        call = ScriptedToolCall("calculate", {"expression": "17 + 25"})
        return ScriptedReply(content="", tool_calls=(call,), completion_tokens=8)
    said = tools[-1]["content"]
    return ScriptedReply(content=f"The calculator says {said}.", completion_tokens=6)


def test_react_explorers_are_agents_as_they_are() -> None:
    with ScriptedServer(calculator_agent, model="m").run_in_thread() as srv:
        proc = run_example("react_explorers.py", "--base-url", srv.base_url, "--model", "m")
        requests = len(srv.requests)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("tools: calculate({'expression': '17 + 25'}) = 42") == 3
    assert "explorer 0: 14 tokens" in proc.stdout
    assert "answer: All three agree: 42." in proc.stdout
    assert "effective TTC: 47" in proc.stdout  # 3 x (8 + 6) + 5
    assert requests == 3 * 2 + 1


def compacts(req: ScriptedRequest) -> ScriptedReply:
    if req.messages[0].get("role") == "system":  # the LLM compactor, with its instruction
        return ScriptedReply(content="It is 42, by adding.", completion_tokens=5)
    return ScriptedReply(content="Let me add.\n17 + 25 = 42", completion_tokens=20)


def test_llm_compactor_rewrites_messages_apart_from_ttc() -> None:
    with ScriptedServer(compacts, model="m").run_in_thread() as srv:
        proc = run_example("llm_compactor.py", "--base-url", srv.base_url, "--model", "m")
    assert proc.returncode == 0, proc.stderr
    assert "last-line messages: ['17 + 25 = 42', '17 + 25 = 42', '17 + 25 = 42']" in proc.stdout
    assert proc.stdout.count("passes on: 'It is 42, by adding.'") == 3
    assert "effective TTC: 80" in proc.stdout  # 3 + 1 explorers x 20, the compactor not
    assert "'completion_tokens': 20" in proc.stdout  # 4 compactions x 5


def test_agent_workflow_resumes_a_failed_round_and_a_review(tmp_path: Path) -> None:
    with ScriptedServer(answers_42, model="m").run_in_thread() as srv:
        proc = run_example(
            "agent_workflow.py",
            *("--base-url", srv.base_url, "--model", "m", "--workdir", str(tmp_path)),
        )
        temperatures = [r.body["temperature"] for r in srv.requests]
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "failed: round 1: all 2 explorer calls failed" in out
    assert "asked again: 2 calls (round 0 was not asked again)" in out
    assert "paused for review: plan='m says: the answer is 42.'" in out
    assert "verdict: accepted" in out and "answer: m says: the answer is 42." in out
    assert "round 1: 2 messages passed on" in out  # streamed progress
    # The planner's call at the workflow's 0.0; PaCoRe's at its own 0.8, never the parent's.
    assert temperatures[0] == 0.0 and set(temperatures[1:]) == {0.8}
    assert (tmp_path / "threads.sqlite").exists()
