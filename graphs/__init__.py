"""Ready graph definitions, installed as ``pacore_graph.graphs``.

- :mod:`pacore_graph.graphs.pacore`: the PaCoRe graph configured from the
  environment, for ``langgraph dev`` / ``langgraph.json``.
"""

__all__: list[str] = []
