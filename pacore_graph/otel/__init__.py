"""OpenTelemetry for PaCoRe runs, in three parts that used to hide behind two vague names.

- :mod:`~pacore_graph.otel.spans`: the spans a run makes (written against the
  API only: a no-op until someone configures a provider);
- :mod:`~pacore_graph.otel.exporters`: SDK set-up, i.e. where spans go
  (``--trace``, ``OTEL_TRACES_EXPORTER``);
- :mod:`~pacore_graph.otel.conventions`: the GenAI semantic conventions'
  attribute names (from the conventions package) and which provider a
  server is.

``pacore_graph.otel.spans`` and ``pacore_graph.otel.exporters`` are the old names of
``spans`` and ``exporters`` and re-export them unchanged.
"""
