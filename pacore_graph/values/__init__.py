"""The values every layer speaks in: the run's records and the pure functions over them.

Records (``Trajectory``, ``PaCoReResult``), answers and their grouping
(``answers``, ``answer_keys``, ``answer_groups``), aggregation, compaction and
the compactor names, the synthesis prompts, the seed rule, OpenTelemetry's
attribute names (``conventions``) and the tracing destinations a setting may
name (``trace_kinds``).

Layer: the lowest but ``errors``/``lazy``: the model clients return these
records and the settings name these choices, so nothing here imports
``control``, ``settings``, ``llm`` or anything above. They lived in
``graph/`` and ``otel/`` until issue 33 gave them a folder of their own, so
that the folders are the layers (``tests/test_layers.py``). No imports here:
``pacore --help`` must not pay for what a value module loads.
"""
