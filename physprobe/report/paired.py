"""Paired tests of two runs on the same questions: McNemar's exact test for an accuracy, approximate randomisation's
p-value for any other figure, the paired bootstrap's interval for every figure, and Holm's correction over several
tests.

Both runs answered the same questions, so their outcomes are correlated (a hard question is hard for both) and the
variance of the difference is Var(A) + Var(B) - 2 Cov(A, B): a paired test resamples or swaps whole questions, never
one run's answers apart from the other's.

McNemar's exact test reads only the discordant questions: ``only_a`` right for A alone, ``only_b`` right for B
alone; under no difference each is B's with probability 1/2, so the two-sided p-value is the binomial tail of the
smaller count, doubled (at most 1). 30 discordant questions all one way:

>>> mcnemar(30, 0) == 2 / 2**30, mcnemar(0, 0), mcnemar(5, 5)
(True, 1.0, 1.0)

The bootstrap draws ``resamples`` sets of whole units (a benchmark's questions share units: ``Evaluation.unit``; each
unit drawn brings all its questions) from a seeded generator, as counts per unit (``draws``); the interval is the
2.5th and 97.5th percentiles of the resampled differences. Approximate randomisation swaps the two runs' answers on
a random half of the units (``swaps``), ``resamples`` times: under no difference either run could have given
either answer, so the p-value is how often a swapped difference is at least as far from zero as the observed one,
counted with the observed: (1 + hits) / (1 + resamples). It holds for a handful of questions, where a bootstrap's
p-value does not (two questions, both lost: the bootstrap sees -1 every time, the swaps see -1, 0, 0, +1).

>>> randomisation_p([-1.0, 0.0, 0.0, 1.0], -1.0), randomisation_p([0.0] * 4, 0.0), interval([0.0] * 4)
(0.6, 1.0, (0.0, 0.0))
>>> holm([0.01, 0.04, 0.03])
[0.03, 0.06, 0.06]
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from physprobe.util import provenance

SEED = provenance.BOOTSTRAP_SEED  # the comparison's resamples, as every run's own bootstrap
RESAMPLES = 1000
# --resamples' bounds: the interval is the 2.5th and 97.5th percentiles of the resamples, and a randomisation p is
# (1 + hits) / (1 + resamples): below 100 neither says anything at 5%; above 100000 the p's last printed digit no
# longer moves while the time and memory (a resamples x units array of draws) keep growing.
MIN_RESAMPLES, MAX_RESAMPLES = 100, 100_000
ALPHA = 0.05  # the verdict: a difference "differs" where its Holm-adjusted p is below this
# A test is run only where at least this many units differ between the two runs: with k units differing, a test
# that swaps whole units (or McNemar's, k discordant questions) sees at most 2^k outcomes, the observed one and its
# mirror among them, so its p is at least 2 / 2^k: 0.0625 for k = 5, 0.031 for k = 6.
MIN_DIFFERING = 6
POWER_FACTOR = statistics.NormalDist().inv_cdf(1 - ALPHA / 2) + statistics.NormalDist().inv_cdf(0.80)  # 2.80


def mcnemar(only_a: int, only_b: int) -> float:
    """McNemar's exact two-sided p-value: the binomial(only_a + only_b, 1/2) probability of a split at least as
    uneven as the one seen, computed exactly in integers (``math.comb``); 1 where no question is discordant."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1))
    return min(1.0, 2 * tail / 2**n)


def draws(units: int, resamples: int, seed: int = SEED):
    """The bootstrap's draws of whole units: a (``resamples``, ``units``) array, how many times each unit is drawn
    when ``units`` are drawn with repeats (the same draws for both runs).

    >>> counts = draws(3, 2, seed=0)
    >>> counts.shape, counts.sum(axis=1).tolist()
    ((2, 3), [3, 3])
    """
    import numpy as np  # here, not at the top: argument errors stay fast (see tests/test_startup.py)

    drawn = np.random.default_rng(seed).integers(0, units, size=(resamples, units))
    offsets = (np.arange(resamples)[:, None] * units + drawn).ravel()
    return np.bincount(offsets, minlength=resamples * units).reshape(resamples, units)


def swaps(units: int, resamples: int, seed: int = SEED):
    """Approximate randomisation's swaps of whole units: a (``resamples``, ``units``) array of booleans, True where
    the two runs' answers to every question of a unit trade places (each unit with probability 1/2).

    >>> swaps(3, 2, seed=0).dtype
    dtype('bool')
    """
    import numpy as np

    return np.random.default_rng([seed, 1]).random((resamples, units)) < 0.5


def weighted_means(values, weights):
    """Per row of ``weights`` (a resample's multiplicity of each question), the weighted mean of each figure's
    ``values`` (figures x questions, NaN where a figure does not count a question) over the questions it counts:
    a (figures, resamples) array, NaN where a resample holds none of them.

    >>> import numpy as np
    >>> weighted_means(np.array([[1.0, 0.0, np.nan]]), np.array([[2, 1, 1], [0, 0, 3]])).round(3).tolist()
    [[0.667, nan]]
    """
    import numpy as np

    counted = ~np.isnan(values)
    total, count = np.where(counted, values, 0.0) @ weights.T, counted.astype(float) @ weights.T
    return np.divide(total, count, out=np.full(total.shape, math.nan), where=count > 0)


def swapped_means(ours, theirs, swapped):
    """Per row of ``swapped`` (True where a question's two answers trade places), B's mean minus A's of each
    figure, the runs' values (figures x questions, NaN where uncounted) traded where True: (figures, swaps)."""
    import numpy as np

    kept = 1.0 - swapped
    filled = [np.where(np.isnan(v), 0.0, v) for v in (ours, theirs)]
    counted = [(~np.isnan(v)).astype(float) for v in (ours, theirs)]
    means = []
    for first, second in ((0, 1), (1, 0)):  # A's side (its own values kept), then B's
        total = filled[first] @ kept.T + filled[second] @ swapped.T
        count = counted[first] @ kept.T + counted[second] @ swapped.T
        means.append(np.divide(total, count, out=np.full(total.shape, math.nan), where=count > 0))
    return means[1] - means[0]


def detectable(standard_error: float) -> float:
    """The minimum detectable difference of a two-sided test at 5% with 80% power: (z(0.975) + z(0.80)) times the
    difference's standard error (2.80 times; Miller, "Adding Error Bars to Evals", 2024, §5).

    >>> round(detectable(0.1), 4)
    0.2802
    """
    return POWER_FACTOR * standard_error


def interval(deltas: Sequence[float]) -> tuple[float, float]:
    """The 95% percentile interval of the resampled differences."""
    import numpy as np

    low, high = np.percentile(np.asarray(deltas, dtype=float), [2.5, 97.5])
    return float(low), float(high)


def randomisation_p(swapped: Sequence[float], observed: float) -> float:
    """Approximate randomisation's two-sided p-value of the difference ``observed``, from the differences of the
    swapped answers (see the module's docstring); 1 for a difference of 0."""
    import numpy as np

    hits = int(np.sum(np.abs(np.asarray(swapped, dtype=float)) >= abs(observed) - 1e-12))
    return min(1.0, (1 + hits) / (1 + len(swapped)))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the order given: the k-th smallest times (m - k + 1), never below the
    one before it, at most 1. Rejecting where an adjusted p is below alpha keeps the chance of any false rejection
    among the m tests at most alpha."""
    order = sorted(range(len(pvalues)), key=lambda i: pvalues[i])
    adjusted, running = [1.0] * len(pvalues), 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(pvalues) - rank) * pvalues[index]))
        adjusted[index] = running
    return adjusted
