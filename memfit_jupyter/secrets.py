"""Redaction: strings that look like API keys or tokens never reach memory, traces, outputs or logs.

``redact(text)`` is the one function; ``redact_obj`` applies it to every string of a
JSON-like value.  Everything that leaves a run goes through it: each event when it is
emitted, the trace's other fields (``trace.trace_of``), every output bundle of a cell
(``jupyter/display.py``), exported spans (``otel/conventions.py``), memory items
(``memory/items.py``) and the package's log records (``RedactingFilter``).
"""

from __future__ import annotations

import functools
import logging
import os
import re
from typing import Any

REDACTED = "[REDACTED]"

_PATTERNS = [
    # OpenAI, Anthropic, and the short test keys people paste (a digit in it: "sk-learn" stays)
    r"\bsk-(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{8,}",
    r"\bgsk_[A-Za-z0-9]{20,}",  # Groq
    r"AKIA[0-9A-Z]{16}",  # AWS access key id
    r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub
    r"github_pat_[A-Za-z0-9_]{30,}",
    r"xox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack
    r"AIza[0-9A-Za-z_\-]{35}",  # Google
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}",  # JWT
]
_SECRET_RE = re.compile("|".join(f"(?:{p})" for p in _PATTERNS))
# "Bearer <token>", "api_key = <value>", "password: <value>", "export GROQ_API_KEY=<value>": keep
# the name, hide the value.  The name may end a longer one (no word boundary before it: "_" is a
# word character, so GROQ_API_KEY has none before API).
_KEYED_RE = re.compile(
    r"(?i)(\bbearer\s+|(?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|passwd"
    r"|(?-i:\b[A-Z][A-Z0-9_]*_KEY))[\"']?\s*[:=]\s*[\"']?)"
    r"([^\s\"',;]{4,})"
)
# A password in a URL (an api_base through a proxy, a database URL): "scheme://user:<value>@".
_URL_PASSWORD_RE = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@]*:)([^\s/@]+)@")
_ENV_NAME = re.compile(r"(?i)(key|token|secret|password)")


_env_cache: list[str] | None = None
#: The environment as it was when ``_env_cache`` was read (its raw mapping, copied), or None.
_env_seen: dict[Any, Any] | None = None


def refresh_env_secrets() -> list[str]:
    """Read again which environment values are secrets (names with key, token, secret,
    password).  Runs call it when they start, after a .env file may have been loaded."""
    global _env_cache, _env_seen
    package_logger()  # loggers made since the last run redact too
    raw = getattr(os.environ, "_data", None)  # the environment's own mapping: compared at C speed
    if _env_cache is not None and raw is not None and raw == _env_seen:
        return _env_cache  # nothing was set or removed since it was read
    found = sorted(
        (v for k, v in os.environ.items() if _ENV_NAME.search(k) and len(v) >= 12),
        key=len,
        reverse=True,
    )
    if found != _env_cache:
        _redact_short.cache_clear()  # what was redacted before did not know these values
    _env_cache = found
    _env_seen = dict(raw) if isinstance(raw, dict) else None
    return _env_cache


def _env_secrets() -> list[str]:
    return _env_cache if _env_cache is not None else refresh_env_secrets()


#: Texts up to this long are remembered with their redaction: a run emits the same prompts, tool
#: names and replies again and again (a replay or a fork's prefix most of all), and three regular
#: expressions over each cost more than a lookup.  Longer texts are redacted each time.
_CACHED_CHARS = 4096


def redact(text: str) -> str:
    """``text`` with anything that looks like a secret replaced by ``[REDACTED]``."""
    if not text:
        return text
    if len(text) <= _CACHED_CHARS:
        return _redact_short(text)
    return _redact(text)


def _redact(text: str) -> str:
    for value in _env_secrets():
        if value in text:
            text = text.replace(value, REDACTED)
    text = _SECRET_RE.sub(REDACTED, text)
    if "://" in text:
        text = _URL_PASSWORD_RE.sub(lambda m: m.group(1) + REDACTED + "@", text)
    return _KEYED_RE.sub(lambda m: m.group(1) + REDACTED, text)


_redact_short = functools.lru_cache(maxsize=8192)(_redact)


_SEQUENCES = (list, tuple)  # a tuple: faster than the union in isinstance


def redact_obj(value: Any) -> Any:
    """Redact every string inside a JSON-like value (keys included)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact(k) if isinstance(k, str) else k: redact_obj(v) for k, v in value.items()}
    if isinstance(value, _SEQUENCES):
        return [redact_obj(v) for v in value]
    return value


class RedactingFilter(logging.Filter):
    """Redacts every record of the package's logger: a provider's error text or a question in a
    log line may quote a key."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = None
        return True


def package_logger() -> logging.Logger:
    """The ``memfit_jupyter`` logger, with secrets redacted from whatever any module logs on it.

    A logger's filters do not see what its children log (``memfit_jupyter.memory``): each
    child that exists gets the filter too (runs call this again when they start)."""
    global _loggers_seen
    log = logging.getLogger("memfit_jupyter")
    known = logging.Logger.manager.loggerDict
    if len(known) == _loggers_seen:  # no logger made since the last look (loggers are never removed)
        return log
    children = [logger for name, logger in list(known.items())
                if name.startswith("memfit_jupyter.") and isinstance(logger, logging.Logger)]
    for logger in (log, *children):
        if not any(isinstance(f, RedactingFilter) for f in logger.filters):
            logger.addFilter(RedactingFilter())
    _loggers_seen = len(known)
    return log


#: How many loggers there were when ``package_logger`` last gave the filter out.
_loggers_seen = -1
