"""Paired statistics of two runs over the same prompts: the difference, its interval, a test.

Two runs' success rates over the same prompts are paired data: each prompt is measured
twice, and prompts differ in difficulty far more than runs do. So the comparison is made
prompt by prompt: for a measure (success, pass@k, pass^k, maj@k of one prompt), the
difference ``d = B - A`` of each prompt, and the run's difference is their mean.

- **Interval**: the 95% percentile bootstrap over prompts of that mean (the prompts are
  resampled, each keeping both its measures: a paired bootstrap). A prompt with several
  samples enters with its estimate from all of them, so its samples are resampled together:
  a bootstrap clustered by prompt. The same draws as pass@k's intervals
  (:func:`~sampling_core.runs.stats.bootstrap.mean_interval`): a run of a million prompts costs
  what one of a hundred does.
- **Verdict**: ``B is better`` when the interval lies above 0, ``A is better`` when below,
  else ``tied (the interval covers 0)``.
- **McNemar's exact test**, for a measure that is pass or fail per prompt (the success
  rate; pass@1 with one sample per prompt): of the ``b`` prompts only A passed and the
  ``c`` only B passed, the two-sided exact binomial p-value of ``min(b, c)`` under
  ``Binomial(b + c, 1/2)``: ``min(1, 2 * P(X <= min(b, c)))``.
- **Smallest detectable difference**: the true difference this many prompts would detect
  (a two-sided test at the 5% level, with 80% power) given how much prompts' differences
  spread: ``(z_0.975 + z_0.80) * s_d / sqrt(P)`` = ``2.80 * s_d / sqrt(P)``, where ``s_d`` is
  the standard deviation of the ``P`` prompts' differences. When no prompt differs
  (``s_d = 0``) it is taken as if one prompt had differed by 1 (``s_d^2 = 1 / P``): no
  spread seen is not proof that none exists.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from math import comb, exp, fsum, lgamma, log, sqrt
from statistics import NormalDist
from typing import Any

from sampling_core.runs.stats.bootstrap import mean_interval
from sampling_core.runs.stats.passk import BOOTSTRAP_SAMPLES, SEED

__all__ = [
    "POWER",
    "PairedDifference",
    "detectable_difference",
    "mcnemar_exact",
    "paired_difference",
    "verdict",
]

LEVEL = 0.05
"""The two-sided level of the interval and of the smallest detectable difference."""
POWER = 0.80
"""The power at which the smallest detectable difference is detected."""
_Z = NormalDist().inv_cdf(1 - LEVEL / 2) + NormalDist().inv_cdf(POWER)  # 2.8016
_EXACT_UP_TO = 5000  # discordant pairs summed as exact integers; beyond, in log space

B_BETTER = "B is better"
A_BETTER = "A is better"
TIED = "tied (the interval covers 0)"


def mcnemar_exact(b: int, c: int) -> float:
    """The two-sided exact McNemar p-value of ``b`` prompts only A passed and ``c`` only B
    passed: ``min(1, 2 * P(X <= min(b, c)))`` for ``X ~ Binomial(b + c, 1/2)``; 1 when no
    prompt differs."""
    if b < 0 or c < 0:
        raise ValueError(f"McNemar's test needs counts >= 0 (b={b}, c={c})")
    n, low = b + c, min(b, c)
    if n == 0:
        return 1.0
    if n <= _EXACT_UP_TO:
        tail = sum(comb(n, i) for i in range(low + 1))
        return min(1.0, 2 * tail / 2**n)
    terms = [lgamma(n + 1) - lgamma(i + 1) - lgamma(n - i + 1) - n * log(2) for i in range(low + 1)]
    top = max(terms)
    return min(1.0, 2 * exp(top) * fsum(exp(t - top) for t in terms))


def detectable_difference(differences: Mapping[float, int]) -> float | None:
    """The smallest detectable difference (the module's docstring) of prompts whose
    differences are ``differences`` (value -> prompts); ``None`` for fewer than 2 prompts."""
    prompts = sum(differences.values())
    if prompts < 2:
        return None
    mean = fsum(d * m for d, m in differences.items()) / prompts
    variance = fsum(m * (d - mean) ** 2 for d, m in differences.items()) / (prompts - 1)
    if variance <= 0.0:
        variance = 1.0 / prompts
    return _Z * sqrt(variance / prompts)


def verdict(low: float, high: float) -> str:
    """What an interval of ``B - A`` says: which run is better, or tied."""
    if low > 0:
        return B_BETTER
    if high < 0:
        return A_BETTER
    return TIED


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """One measure compared over the prompts both runs have: ``B - A`` with its interval."""

    measure: str
    """``success_rate``, ``pass@k``, ``pass^k`` or ``maj@k`` (with its k)."""
    k: int | None
    prompts: int
    a: float
    b: float
    difference: float
    low: float
    high: float
    verdict: str
    detectable: float | None
    """The smallest difference this many prompts could detect (``None``: under 2 prompts)."""
    p_value: float | None = None
    """McNemar's exact p-value (``None`` unless the measure is pass or fail per prompt)."""
    only_a: int | None = None
    """Prompts only A passed (pass-or-fail measures)."""
    only_b: int | None = None
    """Prompts only B passed (pass-or-fail measures)."""

    @property
    def label(self) -> str:
        """The measure with its k: ``success_rate``, ``pass@4``, ``pass^2``, ``maj@8``."""
        return self.measure if self.k is None else f"{self.measure.removesuffix('k')}{self.k}"

    def as_dict(self) -> dict[str, Any]:
        """As JSON-ready data (values rounded to 6 digits)."""
        return {
            "label": self.label,
            "measure": self.measure,
            "k": self.k,
            "prompts": self.prompts,
            "a": round(self.a, 6),
            "b": round(self.b, 6),
            "difference": round(self.difference, 6),
            "low": round(self.low, 6),
            "high": round(self.high, 6),
            "verdict": self.verdict,
            "detectable": None if self.detectable is None else round(self.detectable, 6),
            "mcnemar_p": None if self.p_value is None else round(self.p_value, 6),
            "only_a_passed": self.only_a,
            "only_b_passed": self.only_b,
        }


def paired_difference(
    measure: str,
    pairs: Mapping[tuple[float, float], int],
    *,
    k: int | None = None,
    resamples: int = BOOTSTRAP_SAMPLES,
    seed: int = SEED,
) -> PairedDifference | None:
    """``B - A`` of one measure from its prompts' ``(A, B)`` values (a mapping from the pair
    to the number of prompts that have it); ``None`` when no prompt has both."""
    prompts = sum(m for m in pairs.values() if m > 0)
    if not prompts:
        return None
    differences: Counter[float] = Counter()
    for (a, b), m in pairs.items():
        differences[b - a] += m
    mean, low, high = mean_interval(differences, resamples, seed)
    a_mean = fsum(a * m for (a, _), m in pairs.items()) / prompts
    b_mean = fsum(b * m for (_, b), m in pairs.items()) / prompts
    binary = all(a in (0.0, 1.0) and b in (0.0, 1.0) for a, b in pairs)
    only_a = only_b = p_value = None
    if binary:
        only_a = sum(m for (a, b), m in pairs.items() if a > b)
        only_b = sum(m for (a, b), m in pairs.items() if b > a)
        p_value = mcnemar_exact(only_a, only_b)
    return PairedDifference(
        measure,
        k,
        prompts,
        a_mean,
        b_mean,
        mean,
        low,
        high,
        verdict(low, high),
        detectable_difference(differences),
        p_value,
        only_a,
        only_b,
    )
