"""scripts/install_embedded.py: the README's first set-up step is never silent for long.

The installs themselves need the package index (the README's set-up is
measured by hand, its figures stated with their load); here the script's own
part runs for real: a child process that goes quiet gets our lines in its
silences, its output passes through unchanged, its exit status is the
script's.
"""

from __future__ import annotations

import importlib.util
import io
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "install_embedded.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("install_embedded", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Stamped(io.StringIO):
    """Keeps when each line was completed."""

    def __init__(self) -> None:
        super().__init__()
        self.stamps: list[float] = []

    def write(self, text: str) -> int:
        self.stamps += [time.monotonic()] * text.count("\n")
        return super().write(text)


BEAT = "  ... pip install: still running, "


def test_a_silent_command_gets_a_line_of_ours_every_heartbeat() -> None:
    child = (
        "import sys, time\n"
        "print('Installing collected packages: a, b', flush=True)\n"
        "time.sleep(1.6)\n"
        "sys.stdout.buffer.write('Successfully installed a b \\u2501\\u2501\\n'.encode())\n"
        "sys.exit(3)\n"
    )
    out = Stamped()
    start = time.monotonic()
    status = load().run_with_heartbeat(
        [sys.executable, "-c", child], "pip install", heartbeat=0.4, out=out
    )
    assert status == 3
    lines = out.getvalue().splitlines()
    ours = [line for line in lines if line.startswith(BEAT)]
    assert [line for line in lines if not line.startswith(BEAT)] == [
        "Installing collected packages: a, b",
        "Successfully installed a b ━━",  # the bytes of a character split by a read stay one
    ]
    # A loaded machine may start the child slowly (a line of ours first); the
    # child's 1.6 s of silence gets at least two.
    first, last = lines.index("Installing collected packages: a, b"), len(lines) - 1
    assert sum(first < i < last for i, line in enumerate(lines) if line in ours) >= 2
    gaps = [b - a for a, b in zip([start, *out.stamps], out.stamps, strict=False)]
    assert max(gaps) < 0.4 + 0.3 + 0.5, gaps


def test_a_chatty_command_gets_no_heartbeat() -> None:
    child = "import time\nfor i in range(6):\n    print(i, flush=True); time.sleep(0.1)\n"
    out = io.StringIO()
    assert (
        load().run_with_heartbeat([sys.executable, "-c", child], "x", heartbeat=1.0, out=out) == 0
    )
    lines = out.getvalue().splitlines()
    # Lines of ours may only come before the child's first line (a slow start).
    assert lines[lines.index("0") :] == [str(i) for i in range(6)]


def test_the_steps_are_the_readmes(tmp_path: Path) -> None:
    """``--dry-run`` lists what runs; the README's set-up names the same four commands."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    commands = [line[2:] for line in proc.stdout.splitlines() if line.startswith("$ ")]
    assert [c.split(" ", 1)[1] for c in commands] == [
        "-m venv .venv",
        "-m pip install -e .[embedded]",
        "-m compileall -q pacore_graph tools graphs",
        "model install",
    ]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python3 scripts/install_embedded.py" in readme
    for shown in (
        "python3 -m venv .venv",
        '.venv/bin/python -m pip install -e ".[embedded]"',
        ".venv/bin/python -m compileall -q pacore_graph tools graphs",
        ".venv/bin/pacore model install",
    ):
        assert shown in readme, f"the README no longer says the set-up runs {shown!r}"
    # Anywhere but the repository's root it refuses, before running anything.
    away = subprocess.run(
        [sys.executable, str(SCRIPT)], cwd=tmp_path, capture_output=True, text=True, timeout=30
    )
    assert away.returncode == 2 and "repository's root" in away.stderr
    assert not (tmp_path / ".venv").exists()
