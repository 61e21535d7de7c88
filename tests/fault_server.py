"""A real OpenAI-compatible chat-completions server on 127.0.0.1 that answers from a script.

Each model name has a queue of behaviours, consumed one per request (the last
one repeats)::

    server = FaultServer().start()
    server.script("flaky", ["500", "429", "slow:2.0", "malformed", "ok"])
    # litellm: model="openai/flaky", api_base=server.api_base, api_key="test"

Behaviours: ``ok`` (or ``ok:<content>``), ``400`` (bad request), ``401`` (bad key),
``404`` (no such model), ``429`` (or ``429:<seconds>``, with that Retry-After header),
``500``, ``context`` (400, the prompt is over the context window), ``policy`` (400, the
content policy refused it), ``slow:<seconds>`` (answers ok after that long: past a shorter
client timeout it is a timeout), ``malformed`` (HTTP 200 whose body is not JSON).
A request with ``"stream": true`` gets its ok reply as server-sent events, a few
characters a chunk (``FaultServer(stream_delay_s=...)`` waits that long between chunks, as
a model that writes slowly), then the usage.  ``requests`` counts what each model received;
``bodies`` keeps each request's JSON body, ``get_auth`` / ``post_auth`` their ``Authorization``
headers.  ``GET /v1/models`` lists one model with a
``max_model_len`` of ``context_window`` (as vLLM does), which memfit takes as every model's window.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_CONTENT = json.dumps({"answer": "ok", "confidence": 0.9, "reasoning": ["scripted"]})


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False


class FaultServer:
    def __init__(self, stream_delay_s: float = 0.0, context_window: int = 128_000) -> None:
        self.stream_delay_s = stream_delay_s
        #: The window ``GET /v1/models`` reports for every model.
        self.context_window = context_window
        #: The ``Authorization`` header of each GET (a proxy's login arrives there), and of each POST.
        self.get_auth: list[str | None] = []
        self.post_auth: list[str | None] = []
        self._scripts: dict[str, list[str]] = {}
        self.requests: dict[str, int] = defaultdict(int)
        self.bodies: dict[str, list[dict]] = defaultdict(list)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: _Server | None = None

    # --- control -------------------------------------------------------------------------
    def start(self) -> FaultServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # the model listing, with a window, as vLLM's says it
                owner.get_auth.append(self.headers.get("Authorization"))
                if self.path.rstrip("/").endswith("/models"):
                    owner._send(self, 200, {"object": "list", "data": [
                        {"id": "scripted", "object": "model", "max_model_len": owner.context_window}]})
                else:
                    owner._send(self, 404, {"error": {"message": "not found", "type": "invalid_request_error"}})

            def do_POST(self):
                owner.post_auth.append(self.headers.get("Authorization"))
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                owner._answer(self, body)

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def script(self, model: str, behaviours: list[str]) -> None:
        with self._lock:
            self._scripts[model] = list(behaviours)
            self.requests[model] = 0

    # --- answering -----------------------------------------------------------------------
    def _next(self, model: str) -> str:
        with self._lock:
            queue = self._scripts.get(model) or ["ok"]
            n = self.requests[model]
            self.requests[model] = n + 1
            return queue[min(n, len(queue) - 1)]

    def _answer(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        model = str(body.get("model", ""))
        with self._lock:
            self.bodies[model].append(body)
        behaviour = self._next(model)
        kind, _, arg = behaviour.partition(":")
        if kind == "slow":
            # Sleep in small steps so that stop() is not held up by a sleeping reply.
            deadline = time.monotonic() + float(arg)
            while time.monotonic() < deadline and not self._stop.is_set():
                time.sleep(0.01)
            kind, arg = "ok", ""
        try:
            if kind == "400":
                self._send(handler, 400, {"error": {"message": "bad request: context too long",
                                                    "type": "invalid_request_error"}})
            elif kind == "401":
                self._send(handler, 401, {"error": {"message": "invalid api key", "type": "authentication_error"}})
            elif kind == "404":
                self._send(handler, 404, {"error": {"message": f"The model `{model}` does not exist",
                                                    "type": "invalid_request_error", "code": "model_not_found"}})
            elif kind == "429":
                headers = {"Retry-After": arg} if arg else {}
                self._send(handler, 429, {"error": {"message": "rate limited", "type": "rate_limit_error"}},
                           headers)
            elif kind == "context":
                self._send(handler, 400, {"error": {
                    "message": "This model's maximum context length is 128 tokens. However, your messages "
                               "resulted in 4000 tokens.", "type": "invalid_request_error",
                    "code": "context_length_exceeded"}})
            elif kind == "policy":
                self._send(handler, 400, {"error": {
                    "message": "Your request was rejected as a result of our safety system.",
                    "type": "invalid_request_error", "code": "content_policy_violation"}})
            elif kind == "500":
                self._send(handler, 500, {"error": {"message": "internal error", "type": "server_error"}})
            elif kind == "malformed" and body.get("stream"):
                handler.send_response(200)
                handler.send_header("Content-Type", "text/event-stream")
                handler.send_header("Connection", "close")
                handler.end_headers()
                handler.wfile.write(b'data: {"id": "x", "choices": [{"delta": {"content": "unterm\n\n')
                handler.close_connection = True
            elif kind == "malformed":
                raw = b'{"id": "x", "choices": [{"message": {"content": "unterminated'
                handler.send_response(200)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", str(len(raw)))
                handler.end_headers()
                handler.wfile.write(raw)
            else:
                content = arg or DEFAULT_CONTENT
                if body.get("stream"):
                    self._stream(handler, model, content)
                    return
                self._send(handler, 200, {
                    "id": "chatcmpl-test", "object": "chat.completion", "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                })
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
            pass

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, status: int, payload: dict,
              headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(payload).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(raw)))
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        handler.wfile.write(raw)

    def _stream(self, handler: BaseHTTPRequestHandler, model: str, content: str, piece: int = 8) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Connection", "close")
        handler.end_headers()
        base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": model}

        def event(payload):
            handler.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
            handler.wfile.flush()

        event({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
        for i in range(0, len(content), piece):
            if self._stop.is_set():
                return
            event({**base, "choices": [{"index": 0, "delta": {"content": content[i:i + piece]}}]})
            if self.stream_delay_s:
                self._stop.wait(self.stream_delay_s)
        event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        event({**base, "choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
        handler.close_connection = True
