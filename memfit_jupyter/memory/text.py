"""Tokens shared by the keyword matcher, the hashing embedder and the lexical index.

Lower-cased words (letters, digits, underscore) with a light suffix stemmer,
and CJK text as character bigrams, so that "failed", "fails" and "failing"
meet, and Chinese text matches without a segmenter.
"""

from __future__ import annotations

import re
from functools import lru_cache

_WORD = re.compile(r"[a-z0-9_]+|[\u3400-\u9fff\uf900-\ufaff]+")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_ASCII_WORD = re.compile(r"[a-z0-9_]+")

STOPWORDS = frozenset(
    "a an and are as at be but by can do does for from had has have how i if in into is it its "
    "me my no not of on or our so that the their them then there these they this to was we were "
    "what when where which who why will with you your".split()
)

_SUFFIXES = ("ing", "edly", "ed", "ies", "es", "s", "ly")


@lru_cache(maxsize=65_536)  # vocabularies are small and texts repeat words: memoise
def stem(word: str) -> str:
    """A crude stemmer: strip one common English suffix from words longer than four letters."""
    if len(word) <= 4 or not word.isascii():
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith("ss"):
                return word
            if suffix == "ies":
                return word[:-3] + "y"
            return word[: -len(suffix)]
    return word


def tokens(text: str) -> list[str]:
    """All stemmed tokens of ``text``, in order, stopwords included."""
    low = (text or "").lower()
    if low.isascii():  # the common case, with no CJK check per word (inserts tokenise every memory)
        return [stem(w) for w in _ASCII_WORD.findall(low)]
    out: list[str] = []
    for piece in _WORD.findall(low):
        if _CJK.match(piece):
            out.extend(piece[i : i + 2] for i in range(max(1, len(piece) - 1)))
        else:
            out.append(stem(piece))
    return out


def keywords(text: str) -> list[str]:
    """The distinct keywords of a query: tokens without stopwords or one-letter words, in order."""
    seen: dict[str, None] = {}
    for tok in tokens(text):
        if tok not in STOPWORDS and (len(tok) > 1 or not tok.isascii()):
            seen.setdefault(tok, None)
    return list(seen)
