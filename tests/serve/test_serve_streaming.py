"""The SSE translation of a graph's stream, fed recorded stream items directly."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessageChunk

from pacore_graph.serve.streaming import (
    ProgressTranslator,
    StreamChunks,
    ThinkSplitter,
    sse,
    sse_done,
)
from pacore_graph.values.records import PaCoReResult, Trajectory


def traj(r: int, i: int, tokens: int = 5, error: str | None = None) -> Trajectory:
    return Trajectory(
        round=r,
        index=i,
        content=None if error else f"answer {r}.{i}",
        completion_tokens=tokens,
        error=error,
    )


def result() -> PaCoReResult:
    rounds = ((traj(0, 0), traj(0, 1, error="boom")), (traj(1, 0),))
    return PaCoReResult(answer="answer 1.0", reasoning=None, rounds=rounds, schedule=(2, 1))


def texts(deltas: list[dict[str, Any]], key: str) -> str:
    return "".join(d.get(key, "") for d in deltas)


def test_custom_events_and_final_tokens() -> None:
    t = ProgressTranslator(schedule=(2, 1))
    items: list[tuple[str, Any]] = [
        ("custom", {"event": "round_started", "round": 0, "width": 2}),
        ("messages", (AIMessageChunk(content="not the final round"), {})),
        (
            "custom",
            {
                "event": "explorer_finished",
                "round": 0,
                "index": 1,
                "completion_tokens": 0,
                "error": "boom",
            },
        ),
        ("custom", {"event": "explorer_finished", "round": 0, "index": 0, "completion_tokens": 5}),
        ("updates", {"explore": {"pending": [traj(0, 0)]}}),  # ignored: custom events rule
        (
            "custom",
            {
                "event": "round_compacted",
                "round": 0,
                "messages": 1,
                "failures": 1,
                "completion_tokens": 5,
            },
        ),
        ("custom", {"event": "round_started", "round": 1, "width": 1}),
        (
            "messages",
            (AIMessageChunk(content="", additional_kwargs={"reasoning_content": "hm"}), {}),
        ),
        ("messages", (AIMessageChunk(content="answer "), {})),
        ("messages", (AIMessageChunk(content="1.0"), {})),
        ("updates", {"finalize": {"answer": "answer 1.0", "result": result()}}),
    ]
    deltas = [d for mode, payload in items for d in t.feed(mode, payload)]
    reasoning = texts(deltas, "reasoning_content")
    assert reasoning == (
        "Round 1/2: 2 parallel explorers.\n"
        "  explorer 2 done [1/2]: failed\n"  # the error text is never sent
        "  explorer 1 done [2/2]: 5 tokens\n"
        "Round 1 done: 1 messages for the next round, 1 failed, 5 tokens.\n"
        "Round 2/2: synthesising the answer.\n"
        "hm"
    )
    assert texts(deltas, "content") == "answer 1.0"
    assert t.streamed_content
    assert t.result is not None and t.result.answer == "answer 1.0"


def test_node_updates_alone_give_the_same_progress() -> None:
    """A graph without custom events: progress comes from its node updates."""
    t = ProgressTranslator(schedule=(2, 1))
    items: list[tuple[str, Any]] = [
        ("updates", {"prepare": {"round": 0}}),
        ("updates", {"round": {"prompt": ()}}),
        ("updates", {"explore": {"pending": [traj(0, 1, 0, error="boom")]}}),
        ("updates", {"explore": {"pending": [traj(0, 0)]}}),
        ("updates", {"compact": {"rounds": ((traj(0, 0), traj(0, 1, 0, "boom")),), "round": 1}}),
        ("updates", {"round": {"prompt": ()}}),
        ("updates", {"explore": {"pending": [traj(1, 0)]}}),
        ("updates", {"finalize": {"result": result()}}),
    ]
    deltas = [d for mode, payload in items for d in t.feed(mode, payload)]
    assert texts(deltas, "reasoning_content") == (
        "Round 1/2: 2 parallel explorers.\n"
        "  explorer 2 done [1/2]: failed\n"  # the error text is never sent
        "  explorer 1 done [2/2]: 5 tokens\n"
        "Round 1 done: 1 messages for the next round, 1 failed, 5 tokens.\n"
        "Round 2/2: synthesising the answer.\n"
    )
    assert texts(deltas, "content") == ""  # the server sends the answer itself
    assert not t.streamed_content
    assert t.result is not None


def test_a_voted_answer_has_no_synthesis_round() -> None:
    """RSA, DeepConf, majority: every round's explorers reported, no round's tokens streamed."""
    t = ProgressTranslator(schedule=(2, 2), synthesis=False)
    assert t.final_round is None
    items: list[tuple[str, Any]] = []
    for r in range(2):
        items += [
            ("custom", {"event": "round_started", "round": r, "width": 2}),
            (
                "custom",
                {"event": "explorer_finished", "round": r, "index": 0, "completion_tokens": 5},
            ),
            ("messages", (AIMessageChunk(content="a candidate, not the answer"), {})),
            (
                "custom",
                {"event": "explorer_finished", "round": r, "index": 1, "completion_tokens": 4},
            ),
            (
                "custom",
                {"event": "round_compacted", "round": r, "messages": 2, "completion_tokens": 9},
            ),
        ]
    items.append(("updates", {"finalize": {"result": result()}}))
    deltas = [d for mode, payload in items for d in t.feed(mode, payload)]
    assert texts(deltas, "reasoning_content") == (
        "Round 1/2: 2 parallel explorers.\n"
        "  explorer 1 done [1/2]: 5 tokens\n"
        "  explorer 2 done [2/2]: 4 tokens\n"
        "Round 1 done: 2 messages for the next round, 0 failed, 9 tokens.\n"
        "Round 2/2: 2 parallel explorers.\n"
        "  explorer 1 done [1/2]: 5 tokens\n"
        "  explorer 2 done [2/2]: 4 tokens\n"
        "Round 2 done: 2 answers to vote on, 0 failed, 9 tokens.\n"
    )
    assert texts(deltas, "content") == "" and not t.streamed_content  # the server sends it
    assert t.result is not None


def test_a_round_started_event_gives_the_width_run() -> None:
    """A round a token budget shrank is reported at the width it runs, not the plan's."""
    t = ProgressTranslator(schedule=(4, 8, 1))
    items: list[tuple[str, Any]] = [
        ("custom", {"event": "round_started", "round": 1, "width": 3}),
        ("custom", {"event": "explorer_finished", "round": 1, "index": 2, "completion_tokens": 1}),
    ]
    deltas = [d for mode, payload in items for d in t.feed(mode, payload)]
    assert texts(deltas, "reasoning_content") == (
        "Round 2/3: 3 parallel explorers.\n  explorer 3 done [1/3]: 1 tokens\n"
    )


def test_chunk_shapes() -> None:
    c = StreamChunks(id="chatcmpl-1", model="pacore-low", created=7)
    assert c.chunk({"content": "x"}) == {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 7,
        "model": "pacore-low",
        "choices": [
            {"index": 0, "delta": {"content": "x"}, "logprobs": None, "finish_reason": None}
        ],
    }
    assert c.usage({"prompt_tokens": 1})["choices"] == []
    assert sse({"a": "é"}) == 'data: {"a":"é"}\n\n'.encode()
    assert sse_done() == b"data: [DONE]\n\n"


def split(pieces: list[str]) -> tuple[str, str]:
    splitter = ThinkSplitter()
    deltas = [d for p in pieces for d in splitter.feed(p)] + list(splitter.flush())
    return texts(deltas, "reasoning_content"), texts(deltas, "content")


def test_think_splitter_routes_inline_thinking_to_reasoning() -> None:
    pieces = ["<thi", "nk>abc", " def</th", "ink>\n\nThe answer", " is 5."]
    assert split(pieces) == ("abc def", "\n\nThe answer is 5.")
    # Every cut of the same text gives the same split.
    text = "  <think>x < y </think>\n42"
    for cut in range(len(text) + 1):
        assert split([text[:cut], text[cut:]]) == ("x < y ", "\n42")


def test_think_splitter_leaves_plain_answers_alone() -> None:
    assert split(["<", "b>bold</b>"]) == ("", "<b>bold</b>")
    assert split(["The answer", " is 5."]) == ("", "The answer is 5.")
    assert split(["<thi"]) == ("", "<thi")  # a tag that never completed is text
    assert split(["<think>unfinished"]) == ("unfinished", "")
