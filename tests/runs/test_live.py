"""``pacore run`` live output, driven by a real graph's stream and by hand-made events.

The graph runs against the in-process fake model (answers by input); the
lines expected on stderr are derived from the run's schedule and result,
so they follow the config rather than restate it. The CLI on a real
terminal is ``tests/cli/test_cli_live.py``.
"""

from __future__ import annotations

import io

import pytest
from langchain_core.messages import AIMessageChunk

from pacore_graph import PaCoReConfig, build_pacore_graph
from pacore_graph.runs.live import LiveRun, run_live
from pacore_graph.settings.config import RetryPolicy
from pacore_graph.testing.fake_client import FakeCall, FakeChatClient, FakeReply


class Terminal(io.StringIO):
    """A stream that says it is a terminal (the counter is drawn only there)."""

    def isatty(self) -> bool:
        return True


def reply(call: FakeCall) -> FakeReply:
    if call.seed is not None and call.seed % 1000 == 1:
        return FakeReply(content="", error="HTTP 500: scripted outage")  # one explorer fails
    return FakeReply(content=f"answer {call.sample_index} \\boxed{{4}}", completion_tokens=3)


async def test_one_line_per_round_started_and_compacted_derived_from_the_run() -> None:
    config = PaCoReConfig(rounds=(3, 2), retry=RetryPolicy(max_attempts=1), batch_samples=False)
    config = config.model_copy(update={"sampling": config.sampling.model_copy(update={"seed": 0})})
    graph = build_pacore_graph(FakeChatClient(reply=reply), config=config, tracing=False)
    err = io.StringIO()
    result, streamed = await run_live(graph, "What is 2 + 2?", err=err, out=None)
    assert not streamed
    lines = err.getvalue().splitlines()
    schedule = result.schedule
    started = [line for line in lines if "started" in line]
    assert started == [f"round {r + 1}: {w} explorer(s) started" for r, w in enumerate(schedule)]
    compacted = [line for line in lines if "kept" in line]
    assert len(compacted) == len(schedule)
    for r, line in enumerate(compacted):
        trajectories = result.rounds[r]
        failed = sum(t.error is not None for t in trajectories)
        kept = len(trajectories) - failed
        assert line.startswith(f"round {r + 1}: {kept} message(s) kept")
        assert (f", {failed} failed" in line) == bool(failed)
        tokens = sum(t.completion_tokens or 0 for t in trajectories)
        assert line.endswith(f", {tokens} tokens")


def test_the_counter_is_drawn_only_on_a_terminal() -> None:
    events = [
        {"event": "round_started", "round": 0, "width": 2},
        {"event": "explorer_finished", "round": 0, "index": 0},
        {"event": "explorer_finished", "round": 0, "index": 1},
        {"event": "round_compacted", "round": 0, "messages": 2, "failures": 0,
         "completion_tokens": 9},
    ]  # fmt: skip
    plain, tty = io.StringIO(), Terminal()
    for err in (plain, tty):
        live = LiveRun(err, None)
        for event in events:
            live.progress(event)
    assert plain.getvalue() == (
        "round 1: 2 explorer(s) started\nround 1: 2 message(s) kept, 9 tokens\n"
    )
    assert "\r  1/2 done" in tty.getvalue() and "\r  2/2 done" in tty.getvalue()
    assert "\x1b[K" in tty.getvalue()  # each line clears the counter first


def test_no_stderr_shows_nothing_and_unknown_events_are_ignored() -> None:
    LiveRun(None, None).progress({"event": "round_started", "round": 0, "width": 1})
    err = io.StringIO()
    LiveRun(err, None).progress({"event": "something_new"})
    assert err.getvalue() == ""


def test_tokens_go_to_stdout_and_mark_the_answer_streamed() -> None:
    out = io.StringIO()
    live = LiveRun(None, out)
    live.token(AIMessageChunk(content=""))  # nothing to show
    assert not live.streamed
    for text in ("The", " answer"):
        live.token(AIMessageChunk(content=text))
    assert out.getvalue() == "The answer" and live.streamed
    quiet = LiveRun(None, None)
    quiet.token(AIMessageChunk(content="x"))
    assert not quiet.streamed


async def test_a_graph_that_ends_without_a_result_is_an_error() -> None:
    class NoResult:
        async def astream(self, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
            yield "values", {"messages": []}

    with pytest.raises(RuntimeError, match="without a result"):
        await run_live(NoResult(), "q", err=None, out=None)
