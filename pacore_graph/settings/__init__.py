"""Settings: the run config, option table, ``PACORE_*`` variables, presets, per-run settings.

Layer: may import ``errors``/``lazy``, ``values``, ``tools`` and ``control``
(a config names a quorum); never ``llm`` or above (``tests/test_layers.py``).
No imports here, so that ``pacore --help`` stays fast.
"""
