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

The bootstrap draws ``resamples`` sets of question indices (with repeats) from a seeded generator; the interval is
the 2.5th and 97.5th percentiles of the resampled differences. Approximate randomisation swaps the two runs' answers
on a random half of the questions (``swaps``), ``resamples`` times: under no difference either run could have given
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
from collections.abc import Sequence

from physprobe.util import provenance

SEED = provenance.BOOTSTRAP_SEED  # the comparison's resamples, as every run's own bootstrap
RESAMPLES = 1000


def mcnemar(only_a: int, only_b: int) -> float:
    """McNemar's exact two-sided p-value: the binomial(only_a + only_b, 1/2) probability of a split at least as
    uneven as the one seen, computed exactly in integers (``math.comb``); 1 where no question is discordant."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(only_a, only_b) + 1))
    return min(1.0, 2 * tail / 2**n)


def draws(n: int, resamples: int, seed: int = SEED):
    """The bootstrap's question indices: a (``resamples``, ``n``) array, each row ``n`` draws with repeats.

    >>> draws(3, 2, seed=0).shape
    (2, 3)
    """
    import numpy as np  # here, not at the top: argument errors stay fast (see tests/test_startup.py)

    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def swaps(n: int, resamples: int, seed: int = SEED):
    """Approximate randomisation's swaps: a (``resamples``, ``n``) array of booleans, True where the two runs'
    answers to a question trade places (each with probability 1/2).

    >>> swaps(3, 2, seed=0).dtype
    dtype('bool')
    """
    import numpy as np

    return np.random.default_rng([seed, 1]).random((resamples, n)) < 0.5


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
