"""``python -m pacore_graph``: the ``pacore`` command, for environments without the script."""

from __future__ import annotations

import sys

from pacore_graph.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
