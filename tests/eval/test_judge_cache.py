"""Judge cache: verdicts survive a restart, a torn line is skipped, keys do not collide."""

from __future__ import annotations

from pathlib import Path

from pacore_graph.eval.judge_cache import CachedVerdict, JudgeCache, verdict_key


def test_verdicts_survive_a_restart_and_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "out" / "judge-cache.jsonl"
    cache = JudgeCache(path)
    cache.put("k1", CachedVerdict("yes", 120, "correct: yes"))
    with path.open("a") as sink:
        sink.write('{"key": "k2", "verd')  # the process died mid-write
    again = JudgeCache(path)
    assert len(again) == 1
    assert again.get("k1") == CachedVerdict("yes", 120, "correct: yes")
    assert again.get("k2") is None


def test_keys_do_not_collide_by_joining() -> None:
    assert verdict_key("hle", "m", "ab", "c", "r") != verdict_key("hle", "m", "a", "bc", "r")
    assert verdict_key("hle", "m", "q", "7", "r") != verdict_key("hle", "m2", "q", "7", "r")
