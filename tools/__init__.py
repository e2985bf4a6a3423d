"""Agent tools for explorers, installed as ``pacore_graph.tools``."""

__all__: list[str] = []
