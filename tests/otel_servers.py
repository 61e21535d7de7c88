"""A real OTLP/HTTP receiver on 127.0.0.1 for the export tests, with faults on demand.

``OtlpSink().start()`` answers ``POST /v1/traces`` as a collector does: it
parses the protobuf ``ExportTraceServiceRequest`` (with the official
``opentelemetry-proto`` classes) and keeps the spans and the request headers.
``mode`` chooses how it answers: ``ok``, ``503`` (busy: retryable), ``400``
(refusing: not retryable), ``slow:<seconds>`` (answers ok that much later).
``closed_port()`` is a port on which nothing listens (a collector that is down).

``python tests/otel_servers.py MODE`` runs one in a process of its own (for benchmarks, so
that its work stays out of the measured process): it prints its endpoint, then serves until
its standard input closes.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that gave up waiting
            super().handle_error(request, client_address)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OtlpSink:
    def __init__(self, mode: str = "ok") -> None:
        self.mode = mode
        self.spans: list = []        # opentelemetry.proto Span messages, as received
        self.resources: list = []    # one Resource per ResourceSpans received
        self.headers: list[dict[str, str]] = []
        self.requests = 0
        self.bodies: list[bytes] = []
        self._lock = threading.Lock()
        self._httpd: _Server | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> OtlpSink:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner._answer(self, body)

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    def __enter__(self) -> OtlpSink:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _answer(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        with self._lock:
            self.requests += 1
            self.headers.append({k.lower(): v for k, v in handler.headers.items()})
        mode = self.mode
        if mode.startswith("slow:"):
            time.sleep(float(mode.split(":", 1)[1]))
            mode = "ok"
        if mode != "ok":
            handler.send_response(int(mode))
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        with self._lock:
            self.bodies.append(body)
            for resource_spans in request.resource_spans:
                self.resources.append(resource_spans.resource)
                for scope_spans in resource_spans.scope_spans:
                    self.spans.extend(scope_spans.spans)
        answer = ExportTraceServiceResponse().SerializeToString()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/x-protobuf")
        handler.send_header("Content-Length", str(len(answer)))
        handler.end_headers()
        handler.wfile.write(answer)


if __name__ == "__main__":
    sink = OtlpSink(sys.argv[1] if len(sys.argv) > 1 else "ok").start()
    print(sink.endpoint, flush=True)
    sys.stdin.read()
    sink.stop()
