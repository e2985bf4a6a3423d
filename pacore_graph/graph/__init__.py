"""The PaCoRe graph and its nodes: builder, state, explorers, plans, the compaction step.

Layer: may import ``errors``/``lazy``, ``values`` (the records, answers,
compaction and prompts it runs on), ``tools``, ``control``, ``settings``,
``llm`` and ``otel``; never ``graphs``, ``runs`` or the layers above. No
imports here: ``pacore --help`` must not pay for LangGraph.
"""
