"""The paper's presets (settings/presets): its Table 1, importable without pydantic.

``pacore --help`` lists the preset choices; the module promises to cost no
import, which only a fresh interpreter can check.
"""

from __future__ import annotations

import subprocess
import sys

from pacore_graph.settings.config import PaCoReConfig
from pacore_graph.settings.presets import PRESETS


def test_presets_are_the_papers_configured_widths() -> None:
    # Table 1 of the paper (docs' reference/PACORE.md), before the final K=1 round.
    assert PRESETS == {"low": (4,), "medium": (16,), "high": (32, 4)}
    for name, widths in PRESETS.items():
        assert PaCoReConfig.from_preset(name).schedule == (*widths, 1)


def test_the_presets_module_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from pacore_graph.settings.presets import PRESETS\n"
        "heavy = ('pydantic', 'langgraph', 'langchain_core')\n"
        "print(','.join(m for m in heavy if m in sys.modules) or 'none')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "none"


def test_the_preset_type_names_the_presets() -> None:
    """``PresetName`` is for type checkers, which need the names spelt out: kept equal here."""
    from typing import get_args

    from pacore_graph.settings.config import PresetName

    assert get_args(PresetName) == tuple(PRESETS)
