"""Model calls and transports: the HTTP client, SSE choice streams, batching, sampling.

Layer: may import ``errors``/``lazy``, ``values``, ``tools``, ``control``
and ``settings``; never ``otel``, the graph or anything above it. No imports here, so that
``pacore --help`` stays fast.
"""
