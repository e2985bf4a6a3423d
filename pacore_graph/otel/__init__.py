"""OpenTelemetry for PaCoRe runs: the spans a run makes and where they go.

- :mod:`~pacore_graph.otel.spans`: the spans a run makes (written against the
  API only: a no-op until someone configures a provider);
- :mod:`~pacore_graph.otel.exporters`: SDK set-up, i.e. where spans go
  (``--trace``, ``OTEL_TRACES_EXPORTER``), and
  :mod:`~pacore_graph.otel.export_failures` (an exporter that cannot reach
  its destination, reported once);
- :mod:`~pacore_graph.otel.openinference`: the span kinds and input/output
  attributes Arize Phoenix reads.

The GenAI semantic conventions' attribute names and the provider rule are
values every layer uses (:mod:`pacore_graph.values.conventions`), as are the
trace kinds a setting may name (:mod:`pacore_graph.values.trace_kinds`).

Layer: above ``llm`` (spans read the config and the records), below the
graph.
"""
