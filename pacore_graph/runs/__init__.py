"""Durable runs and files: the runner, fan-out, checkpoints, results files, progress.

Layer: may import everything below it (``errors``/``lazy``, ``settings``,
``control``, ``llm``, ``otel``, ``graph``); never ``serve``, ``eval``,
``rl`` or ``cli``. No imports here, so that ``pacore --help`` stays fast.
"""
