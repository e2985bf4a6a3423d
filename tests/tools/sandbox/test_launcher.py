"""The launcher's parts that run outside a namespace: the memory count and its guard flag.

The launcher itself (namespaces, mounts, init) runs in every LocalSandbox
call (``test_local.py``, ``test_sandbox_containment.py``); here are its
pieces a test can call directly.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pacore_graph.tools.sandbox.launcher import LAUNCH_FLAG, total_anon_bytes

LAUNCHER = Path(sys.modules["pacore_graph.tools.sandbox.launcher"].__file__ or "")


def fake_proc(root: Path, processes: dict[str, str]) -> Path:
    for name, status in processes.items():
        (root / name).mkdir()
        (root / name / "status").write_text(status)
    return root


def test_anonymous_memory_is_summed_over_the_processes(tmp_path: Path) -> None:
    kib = {"1": 100, "2": 2048, "30": 7}
    proc = fake_proc(
        tmp_path,
        {pid: f"Name:\tx\nVmRSS:\t999999 kB\nRssAnon:\t{k} kB\nRssFile:\t5 kB\n"
         for pid, k in kib.items()},
    )  # fmt: skip
    assert total_anon_bytes(str(proc)) == 1024 * sum(kib.values())
    assert total_anon_bytes(str(proc), skip=2) == 1024 * (sum(kib.values()) - kib["2"])


def test_entries_that_are_not_processes_or_have_no_memory_count_nothing(tmp_path: Path) -> None:
    proc = fake_proc(
        tmp_path,
        {"self": "RssAnon:\t50 kB\n", "7": "Name:\tkthreadd\n", "8": "RssAnon:\tlots kB\n"},
    )
    (tmp_path / "9").mkdir()  # exited meanwhile: no status file
    assert total_anon_bytes(str(proc)) == 0


def test_the_real_proc_counts_this_process() -> None:
    import os

    assert total_anon_bytes() > 0
    assert total_anon_bytes(skip=os.getpid()) < total_anon_bytes() + (1 << 30)


def test_without_its_flag_the_launcher_does_nothing() -> None:
    """Run as a script by mistake (or imported), it must not start isolating anything."""
    for args in ([], ["--other"], [LAUNCH_FLAG]):  # the flag alone lacks its three fds
        done = subprocess.run(
            [sys.executable, str(LAUNCHER), *args],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0 and done.stdout == "" and done.stderr == "", args
