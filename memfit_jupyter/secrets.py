"""Redaction: strings that look like API keys or tokens never reach memory, traces, outputs or logs.

``redact(text)`` is the one function; ``redact_obj`` applies it to every string of a
JSON-like value, ``redact_ends`` to a text about to be cut short (a tool's long output) and
``StreamRedactor`` to a text that arrives in pieces (a streamed reply): a key split by a cut or
between two pieces is redacted whole.  Everything that leaves a run goes through it: each event
when it is emitted, the trace's other fields (``trace.trace_of``), every output bundle of a cell
(``jupyter/display.py``), exported spans (``otel/conventions.py``), memory items
(``memory/items.py``) and the package's log records (``RedactingFilter``, tracebacks included).
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
_KEYED_NAME = (
    r"(?i)(\bbearer\s+|(?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|passwd"
    r"|(?-i:\b[A-Z][A-Z0-9_]*_KEY))[\"']?\s*[:=]\s*[\"']?)"
)
_KEYED_RE = re.compile(_KEYED_NAME + r"([^\s\"',;]{4,})")
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


#: Longer than any piece of a key a cut leaves unrecognized, a JWT's included (``redact_ends``).
_CUT_KEY_CHARS = 2048


def _longest_env_secret() -> int:
    env = _env_secrets()
    return len(env[0]) if env else 0  # sorted longest first


def redact_ends(text: str, keep: int) -> tuple[str, str]:
    """The first and the last ``keep`` characters of ``redact(text)``, for a text cut short in
    the middle; ``(redact(text), "")`` when that is no longer than ``2 * keep``.

    Cutting first would leave the two halves of a key across a cut, which no pattern knows.
    A long text is not scanned whole: each end is redacted with a margin past it, wide enough
    that a key the margin's edge cuts stays in the margin."""
    margin = 2 * max(_CUT_KEY_CHARS, _longest_env_secret())
    if len(text) > 2 * (keep + margin):
        head, tail = redact(text[: keep + margin]), redact(text[-(keep + margin):])
        # Keys replaced in a margin shorten it: the piece cut at its edge must still be past `keep`.
        if min(len(head), len(tail)) >= keep + margin // 2:
            return head[:keep], tail[-keep:]
    whole = redact(text)
    if len(whole) <= 2 * keep:
        return whole, ""
    return whole[:keep], whole[-keep:]


#: The characters of the keys ``_PATTERNS`` knows (and of the names before a keyed value).
_KEY_CHAR = re.compile(r"[A-Za-z0-9_.\-]")
#: A keyed value too short to be one yet, at the end of a text: from its first character.
_KEYED_OPEN = re.compile(_KEYED_NAME + r"[^\s\"',;]{0,3}\Z")
#: A URL's credentials not ended by "@" yet, at the end of a text.
_URL_OPEN = re.compile(r"://[^\s/:@]*:[^\s/@]*\Z")
#: How far back from its end a text's keyed value or URL may begin (a name, a separator, a user).
_OPEN_CHARS = 256


def _env_prefix_at_end(text: str) -> int:
    """The length of the longest end of ``text`` that begins an environment secret's value (a
    value is only found whole)."""
    for value in _env_secrets():
        i = text.find(value[0], max(0, len(text) - len(value) + 1))
        while i != -1:
            if value.startswith(text[i:]):  # the first place found is the longest end
                return len(text) - i
            i = text.find(value[0], i + 1)
    return 0


class StreamRedactor:
    """Redacts a text that arrives in pieces (a streamed reply) as it grows: the parts ``advance``
    returns, joined, are ``redact`` of the whole text, and no part holds a piece of a key.

    Each piece redacted alone would miss a key split between two of them.  The whole text so far
    is redacted again each time, and its end is held back for as long as more text could make
    it a key: the word it ends in (a key is a word: "sk-proj-ab" is one once a digit comes), a
    keyed value of under four characters, a URL's credentials before their "@", and the start of
    an environment secret's value.  A pattern added to ``_PATTERNS`` keeps to ``_KEY_CHAR``."""

    def __init__(self) -> None:
        #: What was given out so far: the start of the redacted text.
        self.shown = ""

    def advance(self, text: str, final: bool = False) -> str:
        """What more of the redacted ``text`` (all of it so far) can be given out; all of the
        rest when ``final`` (the text is complete)."""
        whole = redact(text)
        start = len(self.shown)
        if not whole.startswith(self.shown):
            # A key recognized only now began in what was given out, which cannot be taken back:
            # nothing given out after it could join up with the redacted text.
            return ""
        end = len(whole)
        if not final:
            end -= _env_prefix_at_end(whole)
            near = max(0, len(whole) - _OPEN_CHARS)
            keyed = _KEYED_OPEN.search(whole, near)
            if keyed:
                end = min(end, keyed.end(1))
            url = _URL_OPEN.search(whole, near)
            if url:
                end = min(end, url.start())
            # Never inside a word, nor at the end of the last (it may go on): a piece given out
            # alone is redacted again when it is emitted, and must be redacted as in the whole.
            while end > start and _KEY_CHAR.match(whole, end - 1) and (
                    end == len(whole) or _KEY_CHAR.match(whole, end)):
                end -= 1
        if end <= start:
            return ""
        self.shown = whole[:end]
        return whole[start:end]


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
        if record.exc_info:
            # A traceback quotes the exception's message.  Formatters print ``exc_text`` when it is
            # set, and only format ``exc_info`` when it is not: the exception itself is dropped so
            # that no handler writes it out again unredacted.
            record.exc_text = redact(_TRACEBACKS.formatException(record.exc_info))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)  # its source lines may hold a key
        return True


_TRACEBACKS = logging.Formatter()


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
