"""What a model's own server says about it: its context window and its token count.

litellm knows the windows of hosted models; a model behind a custom ``api_base``
(a local llama.cpp, vLLM or LM Studio server, reached as ``openai/<name>``) it
does not know, and the tiered context then cannot keep prompts inside the
window.  Such servers say it themselves:

- llama.cpp's ``llama-server``: ``GET /props`` (``default_generation_settings.n_ctx``,
  the window of one slot) and ``GET /v1/models`` (``meta.n_ctx``), and
  ``POST /tokenize`` counts tokens with the model's own tokenizer;
- vLLM: ``GET /v1/models`` (``max_model_len``);
- LM Studio and others: ``context_length`` / ``max_context_length`` in the model entry.

Every request is short (``TIMEOUT_S``) and a server that says nothing is no error:
the caller gets None.
"""

from __future__ import annotations

import base64
import json
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

#: How long one question to the server may take (a local server answers in milliseconds).
TIMEOUT_S = 3.0
#: Keys of a model entry (or of ``/props``) that give its window, most specific first.
WINDOW_KEYS = ("n_ctx", "max_model_len", "context_length", "max_context_length")


def server_root(api_base: str) -> str:
    """``http://host:port`` of an OpenAI-style base (``.../v1``)."""
    base = api_base.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def _request(url: str, api_key: str | None, body: dict[str, Any] | None = None) -> Any:
    headers = {"Content-Type": "application/json"}
    parts = urllib.parse.urlsplit(url)
    if parts.username is not None:  # a proxy's user:password@ (urllib takes it for part of the port)
        host = parts.hostname or ""
        netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
        url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
        login = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(login.encode()).decode()
    elif api_key:  # a login in the URL wins, as it does for the model calls (httpx's URL auth)
        headers["Authorization"] = f"Bearer {api_key}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:  # noqa: S310 (the user's api_base)
        return json.loads(response.read())


def _window_in(entry: Any) -> int | None:
    if not isinstance(entry, dict):
        return None
    for place in (entry.get("default_generation_settings"), entry.get("meta"), entry):
        if isinstance(place, dict):
            for key in WINDOW_KEYS:
                value = place.get(key)
                if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                    return value
    return None


def served_window(api_base: str, model: str, api_key: str | None = None) -> int | None:
    """The context window the server at ``api_base`` reports for ``model`` (``openai/<name>``), or None."""
    name = model.split("/", 1)[1] if "/" in model else model
    try:
        window = _window_in(_request(server_root(api_base) + "/props", api_key))
        if window:
            return window
    except (OSError, ValueError):
        pass
    try:
        listing = _request(api_base.rstrip("/") + "/models", api_key)
    except (OSError, ValueError):
        return None
    entries = [e for e in (listing.get("data") or []) if isinstance(e, dict)] if isinstance(listing, dict) else []
    named = [e for e in entries if name in (e.get("id"), *(e.get("aliases") or ()))]
    for entry in named or (entries if len(entries) == 1 else []):
        window = _window_in(entry)
        if window:
            return window
    return None


def served_counter(api_base: str, api_key: str | None = None) -> Callable[[str], int] | None:
    """A token counter by the server's own tokenizer (llama.cpp's ``/tokenize``), or None when
    the server has none.  A counter that stops answering falls back to four characters a token."""
    url = server_root(api_base) + "/tokenize"
    try:
        probe = _request(url, api_key, {"content": "probe"})
    except (OSError, ValueError):
        return None
    if not isinstance(probe, dict) or not isinstance(probe.get("tokens"), list):
        return None

    def count(text: str) -> int:
        if not text:
            return 0
        try:
            return len(_request(url, api_key, {"content": text, "add_special": False})["tokens"])
        except (OSError, ValueError, KeyError, TypeError):
            from .tokens import estimate_tokens

            return estimate_tokens(text)

    return count


def reachable(api_base: str, timeout_s: float = 2.0) -> bool:
    """Whether anything listens at ``api_base``'s host and port (a TCP connection is accepted)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(api_base)
    if not parts.hostname:
        return False
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            return True
    except OSError:
        return False
