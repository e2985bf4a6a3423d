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
from pacore_graph.settings.config import ModelRetryPolicy
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
    config = PaCoReConfig(
        rounds=(3, 2), retry=ModelRetryPolicy(max_attempts=1), batch_samples=False
    )
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


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_quiet_round_gets_a_progress_line_every_heartbeat_off_a_terminal() -> None:
    """The embedded model spends 10-30 s on a round with no explorer done: not a silent pipe."""
    clock, err = Clock(), io.StringIO()
    live = LiveRun(err, None, heartbeat=5.0, clock=clock)
    live.progress({"event": "round_started", "round": 0, "width": 4})
    for clock.now in (1.0, 2.0, 4.9):
        live.tick()
    assert err.getvalue().splitlines() == ["round 1: 4 explorer(s) started"]
    clock.now = 5.0
    live.tick()
    clock.now = 6.0
    live.progress({"event": "explorer_finished", "round": 0, "index": 2})  # 1 s after a line
    clock.now = 10.2
    live.progress({"event": "explorer_finished", "round": 0, "index": 0})  # 5.2 s after it
    clock.now = 11.0
    live.progress({"event": "round_compacted", "round": 0, "messages": 4, "failures": 0,
                   "completion_tokens": 40})  # fmt: skip
    clock.now = 30.0
    live.tick()  # between rounds: nothing to report
    assert err.getvalue().splitlines() == [
        "round 1: 4 explorer(s) started",
        "round 1: 0/4 explorer(s) done, 5 s",
        "round 1: 2/4 explorer(s) done, 10 s",
        "round 1: 4 message(s) kept, 40 tokens",
    ]


def test_on_a_terminal_the_counter_ticks_and_gives_way_to_the_answer() -> None:
    clock, tty, out = Clock(), Terminal(), io.StringIO()
    live = LiveRun(tty, out, clock=clock)
    live.progress({"event": "round_started", "round": 1, "width": 1})
    clock.now = 3.0
    live.tick()
    assert tty.getvalue().endswith("\r  0/1 done, 3 s")
    live.token(AIMessageChunk(content="The answer"))
    assert tty.getvalue().endswith("\r\x1b[K")  # the counter is wiped before the tokens
    before = tty.getvalue()
    clock.now = 9.0
    live.tick()
    live.progress({"event": "explorer_finished", "round": 1, "index": 0})
    assert tty.getvalue() == before  # no counter drawn over the streamed answer
    live.progress({"event": "round_compacted", "round": 1, "messages": 1, "failures": 0,
                   "completion_tokens": 2})  # fmt: skip
    # The line starts on a new line: the answer's last line is left as it is.
    assert tty.getvalue()[len(before) :] == "\nround 2: 1 message(s) kept, 2 tokens\n"


async def test_a_slow_server_gets_progress_lines_no_further_apart_than_the_heartbeat() -> None:
    """Real HTTP: each request takes 1.2 s, the heartbeat is 0.4 s; stderr is a pipe."""
    import time

    from pacore_graph import OpenAICompatClient
    from pacore_graph.testing import ScriptedServer

    class Stamped(io.StringIO):
        def __init__(self) -> None:
            super().__init__()
            self.stamps: list[float] = []

        def write(self, text: str) -> int:
            self.stamps += [time.monotonic()] * text.count("\n")
            return super().write(text)

    err = Stamped()
    async with ScriptedServer(latency=1.2) as srv, OpenAICompatClient(srv.base_url, "m") as client:
        graph = build_pacore_graph(client, config=PaCoReConfig(rounds=(2,)), tracing=False)
        start = time.monotonic()
        await run_live(graph, "What is 2 + 2?", err=err, out=None, heartbeat=0.4)
    lines = err.getvalue().splitlines()
    beats = [line for line in lines if "explorer(s) done" in line]
    assert len(beats) >= 2, lines  # at least one per round of 1.2 s
    assert all(line.endswith(" s") for line in beats)
    gaps = [b - a for a, b in zip([start, *err.stamps], err.stamps, strict=False)]
    assert max(gaps) < 0.4 + 0.5 + 0.3, (gaps, lines)  # heartbeat + tick + slack
