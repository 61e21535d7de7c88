"""The intervals of an evaluation: Wilson for a success rate, a paired bootstrap and the exact
McNemar test for the change against a baseline.

Written out (a few lines each) rather than taken from scipy: scipy is not a dependency of
the package, and these are the textbook formulas (Wilson 1927; McNemar's exact test is a
two-sided binomial test on the discordant pairs).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

#: z for a two-sided 95 % interval.
Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` out of ``n`` (``(0, 1)`` when n is 0)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_bootstrap(diffs: Sequence[float], *, resamples: int = 2000, seed: int = 0,
                     level: float = 0.95) -> tuple[float, float]:
    """A percentile interval of the mean of paired differences, resampling the pairs
    (seeded: the same differences give the same interval)."""
    n = len(diffs)
    if n == 0:
        return -1.0, 1.0
    rng = random.Random(seed)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    lo = means[int((1 - level) / 2 * resamples)]
    hi = means[min(resamples - 1, int((1 + level) / 2 * resamples))]
    return lo, hi


def mcnemar_exact(only_variant: int, only_baseline: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs: tasks only the variant solved,
    and tasks only the baseline solved (1.0 when there are none)."""
    n = only_variant + only_baseline
    if n == 0:
        return 1.0
    k = min(only_variant, only_baseline)
    tail: float = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)
