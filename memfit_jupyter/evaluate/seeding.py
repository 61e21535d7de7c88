"""Seeded sampling for a model behind an OpenAI-compatible server: a loopback relay.

The agent's model calls carry no seed or temperature of their own.  ``SeedRelay`` listens
on 127.0.0.1 and forwards every request to the server at ``upstream`` (``.../v1``), with
``seed`` and ``temperature`` set in the JSON body; the seed is part of the path it is
reached at (``api_base(7)`` -> ``http://127.0.0.1:PORT/seed/7``).  So repeat r of a task
samples with seed ``base + r`` in every variant: repeats differ, and the same repeat
reproduces (llama.cpp's server samples deterministically for a given seed and prompt).
The relay also sets ``cache_prompt: false``: with its prompt cache, llama.cpp's server
computes a prompt whose beginning it has cached (a variant run after another on the same
task) with other numerics than the same prompt cold, and at a near-tie samples another token.
Measured on SmolLM2-135M, temperature 0.3, seed 0: one prompt sent three times gave one reply
with the cache and another without it, and in an evaluation ``bare`` and ``default`` runs
given the very same first prompt chose different first tools.  Without the cache, the same
seed and prompt give the same reply whatever ran before.
Streaming replies pass through chunk by chunk.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_PATH = re.compile(r"^/seed/(-?\d+)(/.*)?$")
#: How long the relay waits on the server for one request (a local model on a shared CPU is slow).
UPSTREAM_TIMEOUT_S = 600.0


class SeedRelay:
    """A running relay; ``close()`` stops it.  Use as a context manager."""

    def __init__(self, upstream: str, temperature: float):
        self.upstream = upstream.rstrip("/")
        self.temperature = float(temperature)
        relay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # the reply ends when the connection closes: streams need no length

            def log_message(self, *args: Any) -> None:  # quiet: a sweep makes thousands of requests
                pass

            def do_GET(self) -> None:
                relay._forward(self, None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                relay._forward(self, self.rfile.read(length) if length else b"")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="memfit-seed-relay", daemon=True)
        self._thread.start()

    def api_base(self, seed: int) -> str:
        """The base URL whose requests sample with ``seed``."""
        return f"http://127.0.0.1:{self.port}/seed/{int(seed)}"

    def _forward(self, handler: BaseHTTPRequestHandler, body: bytes | None) -> None:
        m = _PATH.match(handler.path)
        if not m:
            handler.send_error(404, "not a /seed/N/... path")
            return
        seed, rest = int(m.group(1)), m.group(2) or ""
        if body:
            try:
                data = json.loads(body)
            except ValueError:
                data = None
            if isinstance(data, dict):
                data["seed"], data["temperature"] = seed, self.temperature
                data["cache_prompt"] = False  # the same reply whatever the server computed before
                body = json.dumps(data).encode()
        headers = {k: v for k, v in handler.headers.items()
                   if k.lower() not in ("host", "content-length", "connection", "accept-encoding")}
        request = urllib.request.Request(self.upstream + rest, data=body, headers=headers,
                                         method="POST" if body is not None else "GET")
        try:
            upstream = urllib.request.urlopen(request, timeout=UPSTREAM_TIMEOUT_S)
        except urllib.error.HTTPError as exc:
            upstream = exc
        except OSError as exc:
            handler.send_error(502, f"the model server at {self.upstream} did not answer: {exc}")
            return
        with upstream:
            try:
                handler.send_response(upstream.status)
                for k, v in upstream.headers.items():
                    if k.lower() not in ("content-length", "transfer-encoding", "connection"):
                        handler.send_header(k, v)
                handler.end_headers()
                while chunk := upstream.read1(65536) if hasattr(upstream, "read1") else upstream.read(65536):
                    handler.wfile.write(chunk)
                    handler.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                # the run gave up on the call (its time limit): closing upstream stops the generation
                return

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> SeedRelay:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
