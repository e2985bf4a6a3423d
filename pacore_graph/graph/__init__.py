"""The PaCoRe graph and its nodes: state, records, explorers, compaction, prompts, answers.

Layer: may import ``errors``/``lazy``, ``settings``, ``control``, ``llm`` and
``otel``; never ``runs`` or the layers above (``serve``, ``eval``, ``rl``,
``cli``). No imports here: ``pacore --help`` must not pay for LangGraph.
"""
