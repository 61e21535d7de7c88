"""How short a beam the store's dedup search can use: near-duplicates planted at a known cosine
from stored vectors, searched with several (k, beam) pairs, against their cost per probe.

    python tests/benchmarks/dedup_beam.py --size 100000

The index is built like the store's (f32, ip, connectivity 32, expansion_add 128) from the
structured vectors of bench_memory.py.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memory import DIM, RANK, structured  # noqa: E402


def near(v: np.ndarray, cos: float, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors at exactly ``cos`` from the unit rows of ``v``."""
    u = rng.standard_normal(v.shape).astype(np.float32)
    u -= (u * v).sum(1, keepdims=True) * v
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return (cos * v + np.sqrt(1 - cos * cos) * u).astype(np.float32)


def main() -> None:
    from usearch.index import Index

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=100_000)
    p.add_argument("--probes", type=int, default=2_000)
    args = p.parse_args()
    rng = np.random.default_rng(7)
    basis = rng.standard_normal((RANK, DIM)).astype(np.float32)
    data = structured(args.size, rng, basis)
    index = Index(ndim=DIM, metric="ip", dtype="f32", connectivity=32, expansion_add=128)
    t = time.perf_counter()
    for s in range(0, args.size, 10_000):
        index.add(np.arange(s, min(args.size, s + 10_000), dtype=np.uint64), data[s : s + 10_000], threads=0)
    print(f"built {args.size} in {time.perf_counter() - t:.0f} s", flush=True)
    keys = rng.choice(args.size, args.probes, replace=False)
    for cos in (0.90, 0.95):
        probes = near(data[keys], cos, rng)
        for k, beam in ((10, 16), (10, 10), (4, 8), (4, 4), (2, 2), (1, 1)):
            index.expansion_search = beam
            t = time.perf_counter()
            found = index.search(probes, k, threads=0)
            per_probe = (time.perf_counter() - t) / len(probes)
            hit = np.mean([keys[i] in set(np.asarray(found.keys[i]).tolist()) for i in range(len(probes))])
            print(f"cosine {cos:.2f}  k {k:2d}  beam {beam:2d}: found {hit:.4f}  {per_probe * 1e6:.0f} us per probe")


if __name__ == "__main__":
    main()
