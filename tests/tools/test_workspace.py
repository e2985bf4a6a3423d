"""SWE workspace diffs: any file name, bounded memory and size, and they always apply.

Issue 11, items 3 and 4: a file name holding a newline injected lines into the
diff and ``git apply`` then refused the whole of it (the attempt's genuine
change lost); a 15 MB text file gave a 23 MB diff, took the parent past 1 GiB,
and all of it went into the next round's prompt.
"""

from __future__ import annotations

import os
import shutil
import tracemalloc
from pathlib import Path

import pytest

from pacore_graph.graphs.pacore_swe import SWECompactor
from pacore_graph.tools.workspace import (
    apply_diff,
    changed_files,
    copy_tree,
    diff_trees,
    quote_path,
    tree_diff,
)
from pacore_graph.values.records import Trajectory

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

GENUINE_OLD = "def median(values):\n    return values[len(values) // 2]\n"
GENUINE_NEW = "def median(values):\n    return sorted(values)[len(values) // 2]\n"


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path]:
    original = tmp_path / "original"
    (original / "pkg").mkdir(parents=True)
    (original / "pkg" / "stats.py").write_text(GENUINE_OLD)
    modified = copy_tree(original, tmp_path / "modified")
    (modified / "pkg" / "stats.py").write_text(GENUINE_NEW)
    return original, modified


def _apply_to_copy(original: Path, diff: str, where: Path) -> Path:
    fresh = copy_tree(original, where)
    result = apply_diff(diff, fresh)
    assert result.applied, result.message
    return fresh


def test_hostile_file_names_cannot_break_the_diff(trees: tuple[Path, Path], tmp_path: Path) -> None:
    original, modified = trees
    names = [
        "evil\n+++ b/pkg/stats.py\n@@ -1 +1 @@\n-x",  # the injection of issue 11.4
        "tab\tname.txt",
        'quote"and\\backslash.txt',
        "space name.txt",
        "ünïcode.txt",
    ]
    for name in names:
        (modified / name).parent.mkdir(parents=True, exist_ok=True)
        (modified / name).write_text(f"content of {name!r}\n")
    os.makedirs(os.fsencode(modified) + b"/not-utf8-\xff")
    with open(os.fsencode(modified) + b"/not-utf8-\xff/f.txt", "w") as f:
        f.write("undecodable directory name\n")
    diff = diff_trees(original, modified)
    assert diff.complete
    # No file name can start a line of its own in the diff.
    assert "\n+++ b/pkg/stats.py\n@@ -1 +1 @@\n-x" not in diff.text
    fresh = _apply_to_copy(original, diff.text, tmp_path / "fresh")
    assert (fresh / "pkg" / "stats.py").read_text() == GENUINE_NEW  # the genuine change kept
    for name in names:
        assert (fresh / name).read_text() == f"content of {name!r}\n"
    assert os.path.exists(os.fsencode(fresh) + b"/not-utf8-\xff/f.txt")
    assert changed_files(original, fresh) == changed_files(original, modified)


def test_quote_path_follows_git() -> None:
    assert quote_path("a/plain name.py") == "a/plain name.py"
    assert quote_path("a/x\ny") == '"a/x\\ny"'
    assert quote_path('a/"q"\\') == '"a/\\"q\\"\\\\"'
    assert quote_path("a/é") == '"a/\\303\\251"'


def test_only_newline_ends_a_line(trees: tuple[Path, Path], tmp_path: Path) -> None:
    """``\\r``, form feeds and U+2028 inside a line must not split hunks."""
    original, modified = trees
    text = "first\rstill first\x0cand\u2028more\nsecond\n"
    (original / "odd.txt").write_text(text, newline="")
    (modified / "odd.txt").write_text(text.replace("second", "2nd"), newline="")
    fresh = _apply_to_copy(original, tree_diff(original, modified), tmp_path / "fresh")
    assert (fresh / "odd.txt").read_bytes() == (modified / "odd.txt").read_bytes()


def test_a_huge_file_is_left_out_without_being_read(
    trees: tuple[Path, Path], tmp_path: Path
) -> None:
    original, modified = trees
    line = "x" * 79 + "\n"
    (modified / "huge.txt").write_text(line * (15 * 1024 * 1024 // len(line)))  # 15 MB of text
    tracemalloc.start()
    try:
        diff = diff_trees(original, modified)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024, f"diffing allocated {peak} bytes"  # 15 MB read would fail
    assert not diff.complete and any("huge.txt" in x for x in diff.left_out)
    assert len(diff.text) < 10_000
    fresh = _apply_to_copy(original, diff.text, tmp_path / "fresh")
    assert (fresh / "pkg" / "stats.py").read_text() == GENUINE_NEW


def test_the_diff_is_capped_by_whole_files(trees: tuple[Path, Path], tmp_path: Path) -> None:
    original, modified = trees
    for i in range(20):
        (modified / f"gen{i:02}.txt").write_text(f"line {i}\n" * 500)
    diff = diff_trees(original, modified, max_bytes=20_000)
    assert len(diff.text.encode()) <= 20_000
    assert diff.left_out and all("would pass 20000 bytes" in x for x in diff.left_out)
    _apply_to_copy(original, diff.text, tmp_path / "fresh")  # what is there applies whole


def test_binary_files_are_left_out_so_the_rest_applies(
    trees: tuple[Path, Path], tmp_path: Path
) -> None:
    original, modified = trees
    (modified / "blob.bin").write_bytes(b"\x00\x01\x02" * 100)
    (modified / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    diff = diff_trees(original, modified)
    assert sorted(x.split(":")[0] for x in diff.left_out) == ["blob.bin", "latin1.txt"]
    fresh = _apply_to_copy(original, diff.text, tmp_path / "fresh")
    assert (fresh / "pkg" / "stats.py").read_text() == GENUINE_NEW


def test_symlinked_directories_are_not_followed(trees: tuple[Path, Path]) -> None:
    original, modified = trees
    (modified / "loop").symlink_to(modified)
    (modified / "etc").symlink_to("/etc")
    assert changed_files(original, modified) == ["pkg/stats.py"]


def test_the_diff_passed_to_the_next_round_is_capped() -> None:
    big = "diff --git a/f b/f\n" + "+line\n" * 50_000
    trajectory = Trajectory(
        round=0,
        index=0,
        content="done",
        artifacts={"diff": big, "diff_left_out": ["huge.txt: over 1048576 bytes, not diffed"]},
    )
    message = SWECompactor(max_diff_chars=2_000).compact(trajectory)
    assert len(message) < 3_000
    assert "diff cut:" in message and "huge.txt: over 1048576 bytes" in message
