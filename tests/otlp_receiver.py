"""A local OTLP/HTTP receiver for tests: decodes what trace exporters send.

A plain HTTP server on loopback that parses the protobuf
``ExportTraceServiceRequest`` with opentelemetry-proto, the way Jaeger or
Langfuse would, and keeps the request headers (for Langfuse's Basic auth).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


@dataclass
class Receiver:
    url: str
    requests: list[tuple[str, dict[str, str], bytes]] = field(default_factory=list)

    def spans(self) -> list[dict[str, Any]]:
        """Every span received, flattened: name, attributes, links, service name."""
        out = []
        for _path, _headers, body in self.requests:
            req = ExportTraceServiceRequest()
            req.ParseFromString(body)
            for rs in req.resource_spans:
                service = {a.key: a.value.string_value for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        out.append(
                            {
                                "name": span.name,
                                "attributes": {a.key: _value(a.value) for a in span.attributes},
                                "links": [
                                    {a.key: _value(a.value) for a in link.attributes}
                                    for link in span.links
                                ],
                                "service": service.get("service.name"),
                                "project": service.get("openinference.project.name"),
                                "scope": ss.scope.name,
                                "scope_version": ss.scope.version,
                                "schema_url": ss.schema_url,
                                "service_version": service.get("service.version"),
                            }
                        )
        return out


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


@contextmanager
def running_receiver() -> Iterator[Receiver]:
    got: list[tuple[str, dict[str, str], bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            got.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Receiver(url=f"http://127.0.0.1:{server.server_address[1]}", requests=got)
    finally:
        server.shutdown()
        server.server_close()
