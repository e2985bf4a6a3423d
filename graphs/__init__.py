"""Ready graph definitions, installed as ``pacore_graph.graphs``.

Each method here is :func:`~pacore_graph.graph.builder.build_pacore_graph` over
its parts (a round plan, an explorer, an aggregator; ``docs/python.md``).

- :mod:`pacore_graph.graphs.pacore`: the PaCoRe graph configured from the
  environment, for ``langgraph dev`` / ``langgraph.json``.
"""

__all__: list[str] = []
