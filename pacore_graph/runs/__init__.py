"""Durable runs and files: the runner, fan-out, checkpoints, results files, progress.

Layer: may import everything below it (``errors``/``lazy``, ``values``,
``tools``, ``control``, ``settings``, ``llm``, ``otel``, ``graph``,
``graphs``); never ``eval`` or the layers above it. No imports here, so
that ``pacore --help`` stays fast.
"""
