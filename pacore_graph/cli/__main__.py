"""``python -m pacore_graph.cli``: the ``pacore`` command."""

from __future__ import annotations

import sys

from pacore_graph.cli import main

__all__: list[str] = []

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
