"""Tokens shared by the keyword matcher and the lexical index (and, frozen, the hashing embedder).

Lower-cased words (letters, digits, underscore) stemmed by Snowball's English stemmer
(PyStemmer: "failed", "fails" and "failing" meet, and so do "love" and "loved", which a
suffix stripper misses), and CJK text as character bigrams, so that Chinese text
matches without a segmenter.  Query keywords drop English function words (checked on
the word before stemming: Snowball turns "does" into "doe").

``ANALYZER`` names this analysis; a SQLite store records it and rebuilds its full-text
index when it changes.  The hashing embedder keeps the first analysis (``hash_tokens``):
its vectors live in stores under an id that must keep meaning the same vectors.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

import Stemmer

#: The analysis of the full-text index (recorded by stores: a change rebuilds the index).
ANALYZER = "snowball-en-1"

_WORD = re.compile(r"[a-z0-9_]+|[\u3400-\u9fff\uf900-\ufaff]+")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_ASCII_WORD = re.compile(r"[a-z0-9_]+")

#: The first analysis's stopwords (kept for the hashing embedder's features).
HASH_STOPWORDS = frozenset(
    "a an and are as at be but by can do does for from had has have how i if in into is it its "
    "me my no not of on or our so that the their them then there these they this to was we were "
    "what when where which who why will with you your".split()
)
#: English function words that a query's keywords leave out (words, before stemming): the
#: first list plus the common pronouns, auxiliaries and quantifiers, and the halves that
#: contractions split into ("didn't" -> "didn", "t").
STOPWORDS = HASH_STOPWORDS | frozenset(
    "about above after again all also am any because been before being below between both could "
    "did didn doesn doing don down during each few further hadn hasn haven he her here hers herself "
    "him himself his isn just ll more most much myself nor off once only other ours ourselves out "
    "over own re same she should some such than theirs themselves those through too under until up "
    "ve very wasn weren would wouldn yours yourself yourselves".split()
)

_SUFFIXES = ("ing", "edly", "ed", "ies", "es", "s", "ly")
_SNOWBALL = Stemmer.Stemmer("english")


@lru_cache(maxsize=65_536)  # vocabularies are small and texts repeat words: memoise
def stem(word: str) -> str:
    """Snowball's English stem of a lower-case ASCII word (other words are returned as they are)."""
    if len(word) <= 2 or not word.isascii():
        return word
    stemmed: str = _SNOWBALL.stemWord(word)  # PyStemmer has no type information
    return stemmed


def _analyse(text: str, stemmer: Callable[[str], str]) -> list[tuple[str, str]]:
    """(word, token) pairs of ``text`` in order: CJK bigrams are their own word."""
    low = (text or "").lower()
    if low.isascii():  # the common case, with no CJK check per word (inserts tokenise every memory)
        return [(w, stemmer(w)) for w in _ASCII_WORD.findall(low)]
    out: list[tuple[str, str]] = []
    for piece in _WORD.findall(low):
        if _CJK.match(piece):
            out.extend((b, b) for b in (piece[i : i + 2] for i in range(max(1, len(piece) - 1))))
        else:
            out.append((piece, stemmer(piece)))
    return out


def tokens(text: str) -> list[str]:
    """All stemmed tokens of ``text``, in order, stopwords included."""
    return [t for _, t in _analyse(text, stem)]


def keywords(text: str) -> list[str]:
    """The distinct keywords of a query: tokens of words that are not stopwords, nor one
    ASCII letter, in order."""
    seen: dict[str, None] = {}
    for word, tok in _analyse(text, stem):
        if word not in STOPWORDS and (len(word) > 1 or not word.isascii()):
            seen.setdefault(tok, None)
    return list(seen)


@lru_cache(maxsize=65_536)
def _strip_suffix(word: str) -> str:
    """The first analysis's stemmer: one common English suffix off words over four letters."""
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


def hash_tokens(text: str) -> list[str]:
    """The first analysis's tokens (the hashing embedder's, unchanged so its vectors are)."""
    return [t for _, t in _analyse(text, _strip_suffix)]


def tag_keywords(text: str) -> list[str]:
    """The first analysis's distinct keywords (light suffix stripping: "locked" -> "lock",
    "database" stays): words that people read, as tags and in questions, unlike Snowball's
    stems ("databas")."""
    seen: dict[str, None] = {}
    for tok in hash_tokens(text):
        if tok not in HASH_STOPWORDS and (len(tok) > 1 or not tok.isascii()):
            seen.setdefault(tok, None)
    return list(seen)
