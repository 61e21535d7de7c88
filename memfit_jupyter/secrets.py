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
import string
import urllib.parse
from typing import Any

REDACTED = "[REDACTED]"

#: Where a key that begins like a word ("sk-", "gsk_", "Bearer") may start: at a word's start, or
#: right after an escaped line break or tab ("...\\nsk-proj-..." in a JSON text a tool printed),
#: whose letter would otherwise glue it to the word before.
_WORD_START = r"(?:(?<=\\[nrt])|\b)"

_PATTERNS = [
    # OpenAI, Anthropic, and the short test keys people paste (a digit in it: "sk-learn" stays)
    _WORD_START + r"sk-(?=[A-Za-z0-9_\-]*\d)[A-Za-z0-9_\-]{8,}",
    _WORD_START + r"gsk_[A-Za-z0-9]{20,}",  # Groq
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
    r"(?i)(" + _WORD_START + r"bearer\s+|(?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|passwd"
    r"|(?-i:\b[A-Z][A-Z0-9_]*_KEY))[\"']?\s*[:=]\s*[\"']?)"
)
_KEYED_RE = re.compile(_KEYED_NAME + r"([^\s\"',;]{4,})")
# A password in a URL (an api_base through a proxy, a database URL): "scheme://user:<value>@".
_URL_PASSWORD_RE = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@]*:)([^\s/@]+)@")
_ENV_NAME = re.compile(r"(?i)(key|token|secret|password)")


_env_cache: list[str] | None = None
#: The environment as it was when ``_env_cache`` was read (its raw mapping, copied), or None.
_env_seen: dict[Any, Any] | None = None
#: Values redacted beside the environment's (``remember_secrets``): the password of a URL a
#: setting names, the secrets a sweep's worker takes over from the process that started it.
_known: set[str] = set()
#: A value remembered must be this long: each time a short one ("admin") appears in any text,
#: it would be redacted.
MIN_SECRET_CHARS = 8


def refresh_env_secrets() -> list[str]:
    """Read again which environment values are secrets (names with key, token, secret,
    password).  Runs call it when they start, after a .env file may have been loaded."""
    global _env_cache, _env_seen
    package_logger()  # loggers made since the last run redact too
    raw = getattr(os.environ, "_data", None)  # the environment's own mapping: compared at C speed
    if _env_cache is not None and raw is not None and raw == _env_seen:
        return _env_cache  # nothing was set or removed since it was read
    found = sorted({*secret_environment().values(), *_known}, key=len, reverse=True)
    if found != _env_cache:
        _redact_short.cache_clear()  # what was redacted before did not know these values
    _env_cache = found
    _env_seen = dict(raw) if isinstance(raw, dict) else None
    return _env_cache


def secret_environment() -> dict[str, str]:
    """The environment's variables whose values are secrets: a name with key, token, secret or
    password, a value of 12 characters or more."""
    return {k: v for k, v in os.environ.items() if _ENV_NAME.search(k) and len(v) >= 12}


def remember_secrets(values: Any) -> None:
    """Redact these values from now on, wherever they appear, as the environment's secrets are
    (those shorter than ``MIN_SECRET_CHARS`` aside)."""
    global _env_seen
    new = {v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_CHARS} - _known
    if new:
        _known.update(new)
        _env_seen = None  # read again, with them
        refresh_env_secrets()


def known_secrets() -> list[str]:
    """The values ``remember_secrets`` was given (and kept)."""
    return sorted(_known)


def remember_url_passwords(value: Any) -> None:
    """Remember the passwords of the URLs in ``value`` (a string, or the strings of a JSON-like
    value: settings): a URL is redacted whole, but the same password typed alone elsewhere (a
    task, a tool's output) would not be."""
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "://" in item:
                for match in _URL_PASSWORD_RE.finditer(item):
                    found += [match.group(2), urllib.parse.unquote(match.group(2))]
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    remember_secrets(found)


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
_KEY_CHARS = string.ascii_letters + string.digits + "_.-"
#: A keyed value too short to be one yet, at the end of a text: from its first character.
_KEYED_OPEN = re.compile(_KEYED_NAME + r"[^\s\"',;]{0,3}\Z")
#: What a text that ``_KEYED_OPEN`` finds a value in ends with: "bearer" or ":"/"=" (a quote and
#: whitespace after them) and the value.  A quicker first look, from the same place.
_KEYED_OPEN_SEPARATOR = re.compile(r"(?i:bearer\s+|[:=]\s*[\"']?)[^\s\"',;]{0,3}\Z")
#: A URL's credentials not ended by "@" yet, at the end of a text.
_URL_OPEN = re.compile(r"://[^\s/:@]*:[^\s/@]*\Z")
#: How far back from its end a text's keyed value or URL is looked for first (a name, a
#: separator, a user).
_OPEN_CHARS = 256
#: What the last _OPEN_CHARS of a text are all of when one of those open at its end begins
#: before them, the only case it is looked for further back: a keyed value's name (word
#: characters and "-"), its separators and at most three characters of its value; a URL's
#: credentials (no whitespace).
_OPEN_ENDS = {
    _KEYED_OPEN: re.compile(r"[\w\s\"':=\-]*[^\s\"',;]{0,3}"),
    _URL_OPEN: re.compile(r"\S*"),
}
_SPACE = re.compile(r"\s")
#: What a run of whitespace inside a match of ``_KEYED_RE`` follows: the last word of a name it
#: knows ("bearer", the "key" of "api_key" and "GROQ_API_KEY", "token", "secret", "password",
#: "passwd"), a quote after a name, or the ":" or "=" before a value.  A name added to
#: ``_KEYED_NAME`` ends in one of these words, or its last word is added here.
_KEYED_BEFORE_SPACE = re.compile(r"(?i)(?:bearer|key|token|secret|passwd|password|[:=\"'])\Z")
#: The text past its fixed point at which ``StreamRedactor`` looks for a new one, and how much
#: it leaves past the new one beyond what it holds back: it redacts that much again each time.
_COMMIT_CHARS = 256
_COMMIT_SLACK = 64
#: Spaces or line breaks ``StreamRedactor`` tries as a fixed point before it stops looking.
_CUT_TRIES = 8


def _start_at_end(text: str, value: str) -> int:
    """The length of the longest end of ``text`` that begins ``value`` without being all of it."""
    i = text.find(value[0], max(0, len(text) - len(value) + 1))
    while i != -1:
        if value.startswith(text[i:]):  # the first place found is the longest end
            return len(text) - i
        i = text.find(value[0], i + 1)
    return 0


def _env_prefix_at_end(text: str) -> int:
    """The length of the longest end of ``text`` that begins an environment secret's value (a
    value is only found whole)."""
    for value in _env_secrets():
        found = _start_at_end(text, value)
        if found:
            return found
    return 0


def _env_stage(text: str) -> str | None:
    """``text`` with the environment's secret values replaced, as ``_redact`` replaces them first
    (one value after another, longest first), or None when more text could complete a value
    across its end: at one of the steps, the text so far ends in a value's first characters.

    Only such a value can make the replacements in ``text + more`` differ from those in ``text``
    followed by those in ``more``: a value found whole in one or the other is replaced the same."""
    for value in _env_secrets():
        if _start_at_end(text, value):
            return None
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def _open_at_end(pattern: re.Pattern[str], text: str, pos: int) -> re.Match[str] | None:
    """``pattern.search(text, pos)``, for ``_KEYED_OPEN`` only when its quicker look finds one."""
    if pattern is _KEYED_OPEN and not _KEYED_OPEN_SEPARATOR.search(text, pos):
        return None
    return pattern.search(text, pos)


class StreamRedactor:
    """Redacts a text that arrives in pieces (a streamed reply) as it grows: the parts ``advance``
    returns, joined, are ``redact`` of the whole text, and no part holds a piece of a key.

    Each piece redacted alone would miss a key split between two of them.  So the text is
    redacted again each time it grows, from a fixed point on (below), and its end is held back
    for as long as more text could make it a key: the word it ends in (a key is a word:
    "sk-proj-ab" is one once a digit comes), a keyed value of under four characters, a URL's
    credentials before their "@", and the start of an environment secret's value (in the text as
    it came, as well: a key or keyed value redacted at the end may have taken the value's start,
    and lets it go once the value is whole).  A pattern added to ``_PATTERNS`` keeps to
    ``_KEY_CHARS``.

    A fixed point is a place where the text splits in two for good: ``redact(head + more)`` is
    ``redact(head) + redact(more)`` whatever ``more`` is.  ``redact(head)`` is then final, given
    out already, and never redacted again: each call redacts the text past the last fixed point,
    not all of it (which made a long reply cost the square of its length).  ``_fixed_cut`` takes
    a place after a space or line break where no match of ``redact``'s steps can run across,
    nor look across, whatever comes next; each step is ``redact``'s own, one after another:

    - an environment secret's value can hold anything, whitespace too: ``head``, as the values
      replaced before left it, must not end in the first characters of one (``_env_stage``);
    - the shaped keys (``_PATTERNS``) and a URL with a password hold no whitespace, and look no
      further back than the two characters before them (``\\b``, or an escaped line break or
      tab: a backslash and a letter), here a space and what follows it;
    - a keyed value (``_KEYED_RE``) takes in whitespace only after a name, a quote or ":"/"="
      ("password:  value", "Bearer   token"): ``head`` without its last run of whitespace must
      not end in one of those (``_KEYED_BEFORE_SPACE``).  A key or URL password replaced before
      that run leaves "]" or "@" there, neither.

    A text with no such place (no space for long) is redacted whole each time, as before."""

    def __init__(self) -> None:
        #: What was given out so far: the start of the redacted text.
        self.shown = ""
        #: Characters passed to redaction (and to the look for environment secrets) so far: a
        #: constant times the text's length for a text with spaces, not its square.
        self.scanned = 0
        #: How much of the text, and of ``shown`` (its redaction), lies before the fixed point.
        self._raw_done = 0
        self._done = 0
        #: The length of the text past the fixed point at which a new one is looked for.
        self._commit_at = _COMMIT_CHARS

    def advance(self, text: str, final: bool = False) -> str:
        """What more of the redacted ``text`` (all of it so far: each call's text is the last
        one's and more) can be given out; all of the rest when ``final`` (the text is complete)."""
        raw = text[self._raw_done:]
        tail = self._redacted(raw)  # the redacted text from the fixed point on
        done, start = self._done, len(self.shown)
        if not tail.startswith(self.shown[done:]):
            # A key recognized only now began in what was given out, which cannot be taken back:
            # nothing given out after it could join up with the redacted text.
            return ""
        end = done + len(tail)
        if not final:
            end = self._held_back(raw, tail, start)
            self._commit(raw, tail, max(start, end))
        if end <= start:
            return ""
        piece = tail[start - done:end - done]
        # Extended in place when nothing else holds it (CPython's string concatenation), where
        # `self.shown += piece` would copy all that was given out for each piece.
        shown, self.shown = self.shown, ""
        shown += piece
        self.shown = shown
        return piece

    def _held_back(self, raw: str, tail: str, start: int) -> int:
        """Where what can be given out of the redacted text ends (the class's docstring), for
        ``raw``, the text past the fixed point, and ``tail``, its redaction."""
        done = self._done
        whole = done + len(tail)  # the redacted text's length
        env_chars = _longest_env_secret()
        near = max(0, whole - _OPEN_CHARS)
        # The redacted text's end, from far enough back for each look below: the last
        # _OPEN_CHARS and the character before them (a name's \b), the longest environment
        # secret's length, and from the character before the fixed point on (given out already).
        w0 = max(0, min(done - 1, near - 1, whole - env_chars))
        window = self.shown[w0:done] + tail
        end = whole - _env_prefix_at_end(window)
        for pattern, open_end in _OPEN_ENDS.items():
            found = _open_at_end(pattern, window, near - w0)
            if found is None and done < near and open_end.fullmatch(window, near - w0):
                # A name, its separators or a URL's user longer than _OPEN_CHARS: none runs
                # across the fixed point (the space before it is no part of one).
                found = _open_at_end(pattern, window, done - w0)
            if found:  # a keyed value is held back from its value on, a URL from its "://"
                end = min(end, w0 + (found.end(1) if pattern is _KEYED_OPEN else found.start()))
        # Never inside a word, nor at the end of the last (it may go on): a piece given out
        # alone is redacted again when it is emitted, and must be redacted as in the whole.
        if end > start and (end == whole or tail[end - done] in _KEY_CHARS):
            word = tail[start - done:end - done]
            end -= len(word) - len(word.rstrip(_KEY_CHARS))
        if end > start and self._end_may_change(raw, tail):
            cut = self._fixed_cut(raw, tail, len(raw), len(tail))
            end = min(end, done + (cut[1] if cut else 0))
        return end

    def _end_may_change(self, raw: str, tail: str) -> bool:
        """Whether more text could change the redaction of ``raw`` (the text past the fixed
        point; ``tail`` is its redaction) before the end held back from ``tail`` alone: then only
        what comes before a fixed point is certain.

        The looks at the redacted text see a word or an environment secret's start only as far
        as no redaction cut into it.  The last word (as it came) was redacted in part when the
        redacted text does not end in it: "sk-learnAKIA…" is "sk-learn[REDACTED]" until a digit
        makes all of it one key.  An environment secret's value begun at the end, which a key
        or keyed value took in ("password: <value>"), is replaced first once whole, and the
        match that took it then ends elsewhere."""
        word = len(raw) - len(raw.rstrip(_KEY_CHARS))
        if word and not tail.endswith(raw[-word:]):
            return True
        return self._env_replaced(raw) is None

    def _commit(self, raw: str, tail: str, shown: int) -> None:
        """Move the fixed point up, near the end of what is given out (``shown`` characters of
        the redacted text, this call's piece included), once the text past it is long."""
        if len(raw) < self._commit_at:
            return
        given = shown - self._done  # of `tail`
        limit = len(raw) - (len(tail) - given) - _COMMIT_SLACK
        cut = self._fixed_cut(raw, tail, limit, given) if limit > 0 else None
        if cut is None:
            self._commit_at = len(raw) + _COMMIT_CHARS  # none near the end: not again at once
            return
        self._raw_done += cut[0]
        self._done += cut[1]
        self._commit_at = _COMMIT_CHARS

    def _fixed_cut(self, raw: str, tail: str, limit: int, most: int) -> tuple[int, int] | None:
        """A fixed point in ``raw`` (the text past the current one; ``tail`` is its redaction)
        at or before ``limit``, after a space or line break (the class's docstring), with the
        length of ``redact(raw[:point])``, at most ``most``: the last of the few tried, or None."""
        for _ in range(_CUT_TRIES):
            space = max(raw.rfind(" ", 0, limit), raw.rfind("\n", 0, limit))
            if space < 0:
                return None
            point, limit = space + 1, space
            head = self._env_replaced(raw[:point])
            if head is None or not _SPACE.match(head, len(head) - 1):
                continue  # an environment secret's value may run across, or ends here
            spaces_from = len(head.rstrip())
            if _KEYED_BEFORE_SPACE.search(head, max(0, spaces_from - 8), spaces_from):
                continue  # a keyed value's name or separator before the spaces
            rest = self._redacted(raw[point:])
            size = len(tail) - len(rest)
            if size > most:
                continue
            if size < 0 or not tail.endswith(rest):
                return None  # never: at a fixed point the two redactions join up to the whole's
            return point, size
        return None

    def _redacted(self, text: str) -> str:
        """``redact(text)``, counted in ``scanned``, and not kept in ``redact``'s cache: each
        text of the stream is redacted once."""
        self.scanned += len(text)
        return _redact(text) if text else text

    def _env_replaced(self, text: str) -> str | None:
        """``_env_stage(text)``, counted in ``scanned``."""
        if not _env_secrets():
            return text
        self.scanned += len(text)
        return _env_stage(text)


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
