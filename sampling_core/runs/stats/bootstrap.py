"""The bootstrap of a mean over prompts, from how many prompts share each value.

Resampling ``P`` prompts with replacement and averaging their values is, when the values
come in a few distinct kinds (pass@k of a prompt depends only on its ``(n, c)``), the same
as drawing how many of the ``P`` draws land on each kind: a multinomial draw, made here as
one binomial draw per kind. A resample then costs a few draws whatever ``P`` is, and memory
holds one count per kind: the bootstrap of a run of a million prompts takes as long as
that of a hundred, and every prompt is resampled (no subsample, no cap).

Binomial variates: inversion (waiting times) when the expected count is small, else
Hörmann's transformed rejection with squeeze (BTRS; W. Hörmann, "The generation of binomial
random variates", J. Statist. Comput. Simul. 46, 1993).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from math import floor, fsum, lgamma, log, sqrt

__all__ = ["binomial", "bootstrap_means", "mean_interval"]


def binomial(n: int, p: float, rng: random.Random) -> int:
    """A draw of the number of successes in ``n`` trials of chance ``p``."""
    if n <= 0 or p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    if p > 0.5:
        return n - binomial(n, 1.0 - p, rng)
    if n * p < 10.0:
        return _by_waiting_times(n, p, rng)
    return _btrs(n, p, rng)


def _by_waiting_times(n: int, p: float, rng: random.Random) -> int:
    """Count the successes by drawing the geometric gaps between them."""
    log_q = log(1.0 - p)
    successes, position = 0, 0
    while True:
        position += floor(log(1.0 - rng.random()) / log_q) + 1
        if position > n:
            return successes
        successes += 1


def _btrs(n: int, p: float, rng: random.Random) -> int:
    """Transformed rejection with squeeze (needs ``n * p >= 10`` and ``p <= 0.5``)."""
    q = 1.0 - p
    spq = sqrt(n * p * q)
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    v_r = 0.92 - 4.2 / b
    alpha = (2.83 + 5.1 / b) * spq
    log_odds = log(p / q)
    mode = floor((n + 1) * p)
    h = lgamma(mode + 1) + lgamma(n - mode + 1)
    while True:
        u = rng.random() - 0.5
        v = rng.random()
        us = 0.5 - abs(u)
        k = floor((2.0 * a / us + b) * u + c)
        if k < 0 or k > n:
            continue
        if us >= 0.07 and v <= v_r:
            return k
        v = log(v * alpha / (a / (us * us) + b))
        if v <= h - lgamma(k + 1) - lgamma(n - k + 1) + (k - mode) * log_odds:
            return k


def bootstrap_means(
    weights: Mapping[float, int], resamples: int, rng: random.Random
) -> list[float]:
    """The sorted means of ``resamples`` bootstrap resamples of a population in which
    ``weights[value]`` members have ``value`` (each resample as large as the population)."""
    kinds = sorted((value, count) for value, count in weights.items() if count > 0)
    size = sum(count for _, count in kinds)
    if not size:
        return []
    means = []
    for _ in range(resamples):
        left, mass, total = size, size, []
        for value, count in kinds[:-1]:
            drawn = binomial(left, count / mass, rng)
            total.append(value * drawn)
            left -= drawn
            mass -= count
        total.append(kinds[-1][0] * left)
        means.append(fsum(total) / size)
    means.sort()
    return means


def mean_interval(
    weights: Mapping[float, int], resamples: int, seed: int
) -> tuple[float, float, float]:
    """The mean of a population in which ``weights[value]`` members have ``value``, and its
    95% percentile bootstrap interval: the 2.5th and 97.5th percentiles of the means of
    ``resamples`` resamples drawn with ``random.Random(seed)`` (the same seed gives the same
    interval). ``(nan, nan, nan)`` for an empty population."""
    size = sum(count for count in weights.values() if count > 0)
    if not size:
        return (float("nan"),) * 3
    means = bootstrap_means(weights, resamples, random.Random(seed))
    value = fsum(v * m for v, m in weights.items() if m > 0) / size
    return value, means[int(0.025 * (resamples - 1))], means[round(0.975 * (resamples - 1))]
