"""Where dataset runs keep their checkpoints (runs/filenames), named without importing LangGraph."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pacore_graph.runs.checkpoint import default_checkpoint_path
from pacore_graph.runs.filenames import EVAL_CHECKPOINT_FILE, RUN_CHECKPOINT_SUFFIX


def test_the_names_are_the_ones_the_runs_use(tmp_path: Path) -> None:
    output = tmp_path / "results.jsonl"
    assert default_checkpoint_path(output) == output.with_name(output.name + RUN_CHECKPOINT_SUFFIX)
    assert default_checkpoint_path(tmp_path, eval_dir=True) == tmp_path / EVAL_CHECKPOINT_FILE


def test_the_names_cost_no_langgraph_import() -> None:
    code = "import sys\nimport pacore_graph.runs.filenames\nprint('langgraph' in sys.modules)\n"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "False"
