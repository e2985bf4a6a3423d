"""The progress bar of a batch run: tqdm on the file given, or a NoBar that costs nothing."""

from __future__ import annotations

import io
import subprocess
import sys

from pacore_graph.runs.progress import NoBar, progress_bar


def test_an_enabled_bar_counts_on_the_file_given() -> None:
    out = io.StringIO()
    bar = progress_bar(3, desc="problems", unit="run", enabled=True, file=out)
    bar.update()
    bar.update(2)
    bar.set_postfix(failed=0)
    bar.close()
    text = out.getvalue()
    assert "problems" in text and "3/3" in text and "run" in text and "failed=0" in text


def test_a_disabled_bar_takes_the_same_calls_and_writes_nothing() -> None:
    bar = progress_bar(3, desc="problems", unit="run", enabled=False, file=io.StringIO())
    assert isinstance(bar, NoBar)
    bar.update()
    bar.update(5)
    bar.set_postfix(failed=1)
    bar.close()


def test_a_disabled_bar_does_not_import_tqdm() -> None:
    """The point of NoBar: even a disabled tqdm starts a monitor thread and a lock."""
    code = (
        "import sys\nfrom pacore_graph.runs.progress import progress_bar\n"
        "progress_bar(1, desc='d', unit='u', enabled=False).update()\n"
        "print('tqdm' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
