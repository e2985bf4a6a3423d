"""serve/method_graphs: the served methods' graphs, compiled once each, a bounded few kept.

The cache is fed a fake builder that answers by its input (the spec's text),
so what is built and what is kept are read off the specs asked for. The
runs themselves go over HTTP in ``test_serve_methods.py``.
"""

from __future__ import annotations

import pytest

from pacore_graph.graphs.deepconf import default_warmup
from pacore_graph.serve.method_graphs import (
    DEFAULT_CACHED_METHODS,
    MethodGraphs,
    progress_schedule,
)
from pacore_graph.settings.grammar import METHOD_DEFAULTS, MethodSpec, parse_served_model


def graphs(size: int = 2) -> tuple[MethodGraphs, list[str]]:
    built: list[str] = []

    def build(spec: MethodSpec) -> str:
        built.append(spec.text)
        return f"graph of {spec.text}"

    return MethodGraphs(build, size=size), built


def test_one_graph_per_spec_text_shared_by_a_bare_name_and_its_default() -> None:
    cache, built = graphs()
    first = cache.get(parse_served_model("rsa"))
    assert first == "graph of rsa:16,4,10"
    assert cache.get(parse_served_model("rsa:16,4,10")) is first
    assert cache.get(parse_served_model("rsa")) is first
    assert built == ["rsa:16,4,10"] and cache.built == 1


def test_the_least_recently_used_graph_goes_first() -> None:
    cache, built = graphs(size=2)
    a, b, c = (parse_served_model(n) for n in ("rsa:4,2,2", "deepconf:4", "majority:3"))
    cache.get(a)
    cache.get(b)
    cache.get(a)  # a is now the most recently used
    cache.get(c)  # so b goes
    assert len(cache) == 2
    assert a.text in cache and c.text in cache and b.text not in cache
    cache.get(b)  # built again
    assert built == ["rsa:4,2,2", "deepconf:4", "majority:3", "deepconf:4"]
    assert len(METHOD_DEFAULTS) <= DEFAULT_CACHED_METHODS  # every listed default stays compiled


@pytest.mark.parametrize("size", [0, -1, True, 1.5])
def test_the_size_is_a_positive_integer(size: object) -> None:
    with pytest.raises(ValueError, match="size"):
        MethodGraphs(lambda spec: None, size=size)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "schedule", "synthesis"),
    [
        ("pacore:3,2", (3, 2, 1), True),  # PaCoRe's final K=1 round writes the answer
        ("pacore-low", (4, 1), True),
        ("rsa:4,2,3", (4, 4, 4), False),  # T populations, then a vote
        ("deepconf:8", (8,), False),
        ("majority:5", (5,), False),
        ("deepconf-online:4", (default_warmup(4), 4 - default_warmup(4)), False),
        ("deepconf-online:64", (16, 48), False),  # the public code's warm-up of 16
        ("aggagent:6", (6, 1), True),  # N explorers, then the agent writes the answer
        ("aggagent", (16, 1), True),
    ],
)
def test_progress_schedule(name: str, schedule: tuple[int, ...], synthesis: bool) -> None:
    assert progress_schedule(parse_served_model(name)) == (schedule, synthesis)
