"""The progress of a batch run: tqdm, lines off a terminal, or a NoBar that costs nothing."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys

from pacore_graph.runs.progress import NoBar, ProgressLines, live_progress, progress_bar


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


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_lines_one_per_finished_unit_and_one_after_each_heartbeat_of_silence() -> None:
    """Off a terminal: whole lines, never a silence longer than the heartbeat while units run."""
    clock, out = Clock(), io.StringIO()
    bar = ProgressLines(3, desc="majority:4", unit="run", file=out, heartbeat=5.0, clock=clock)
    clock.now = 1.0
    bar.update()
    for clock.now in (2.0, 4.0, 5.9):
        bar.tick()
    clock.now = 6.0
    bar.tick()  # 5 s since the last line
    clock.now = 7.0
    bar.tick()
    bar.set_postfix(failed=1)
    clock.now = 8.4
    bar.update(2)
    clock.now = 30.0
    bar.tick()  # every unit done: nothing more to say
    bar.close()
    assert out.getvalue().splitlines() == [
        "majority:4: 1/3 run(s) done, 1 s",
        "majority:4: 1/3 run(s) done, 6 s",
        "majority:4: 3/3 run(s) done, failed=1, 8 s",
    ]


async def test_live_progress_off_a_terminal_writes_heartbeat_lines_while_its_block_runs() -> None:
    out = io.StringIO()
    async with live_progress(2, desc="d", unit="run", enabled=True, file=out, heartbeat=0.2) as bar:
        assert isinstance(bar, ProgressLines)
        await asyncio.sleep(0.55)
        bar.update(2)
    lines = out.getvalue().splitlines()
    assert lines[-1].startswith("d: 2/2 run(s) done")
    assert 2 <= sum(line.startswith("d: 0/2 run(s) done") for line in lines) <= 3, lines


async def test_live_progress_on_a_terminal_redraws_the_bar_and_off_writes_nothing() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Terminal()
    async with live_progress(1, desc="d", unit="run", enabled=True, file=tty, heartbeat=0.2):
        await asyncio.sleep(0.35)
        drawn = tty.getvalue().count("\r")
    assert drawn >= 3  # tqdm's first draw, then a redraw per tick (0.1 s)
    quiet = io.StringIO()
    async with live_progress(1, desc="d", unit="run", enabled=False, file=quiet) as bar:
        assert isinstance(bar, NoBar)
        await asyncio.sleep(0.25)
        bar.update()
    assert quiet.getvalue() == ""
