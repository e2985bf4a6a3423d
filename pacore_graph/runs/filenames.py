"""Names of the files dataset runs keep beside their output, in a module with no imports.

The ``pacore`` command states them in ``--help`` without importing LangGraph
(see :mod:`pacore_graph.runs.checkpoint`, which uses them).
"""

__all__ = ["EVAL_CHECKPOINT_FILE", "RUN_CHECKPOINT_SUFFIX"]

#: ``pacore run --output R`` keeps its checkpoints in ``R`` + this suffix.
RUN_CHECKPOINT_SUFFIX = ".checkpoints.sqlite"

#: ``pacore eval --out DIR`` keeps its checkpoints in ``DIR/`` + this name.
EVAL_CHECKPOINT_FILE = "checkpoints.sqlite"
