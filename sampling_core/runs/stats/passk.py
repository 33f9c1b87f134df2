"""Unbiased pass@k and pass^k over a run's prompts, with bootstrap confidence intervals.

For one prompt with ``n`` independent samples of which ``c`` passed, the chance that at
least one of ``k`` samples drawn without replacement passes is (Chen et al. 2021,
"Evaluating Large Language Models Trained on Code")::

    pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n - c + 1}^{n} (1 - k / i)

and the chance that all ``k`` of them pass (pass^k, "pass hat k": how reliably a prompt is
answered, k times in a row) is::

    pass^k = C(c, k) / C(n, k) = prod_{i = 0}^{k - 1} (c - i) / (n - i)

The product forms never build the large binomials. A run's value is the mean over its
prompts; its 95% interval is the 2.5th and 97.5th percentile of that mean over 1,000
bootstrap resamples of all the prompts (drawn with a fixed seed, so a report is the same
every time). A prompt's value depends only on its ``(n, c)``, so the run is kept as the
number of prompts with each ``(n, c)``: a few numbers, whatever the number of prompts.

A rescored run may hold samples nobody can judge (cut before their end, stopped by their
run at a pass the new checks fail, or judged by a check that needs what the run did not
keep: "not known", ``u`` of them). A prompt is then
``(n, c, u)``: the estimate is over the ``n`` known samples, and each k also carries the
bounds it would have with every one of the ``u`` counted failed (``(n + u, c)``) and
counted passed (``(n + u, c + u)``), over every prompt with k samples counting those not
known. The estimate is over the prompts with k *known* samples: when a prompt has fewer
(some of its samples not known), it is left out of the estimate but not of the bounds, so
the two are over different prompts and the estimate may fall outside the bounds; each k
then counts those prompts (``left_out``) and its note says so. This is the one place that
rule is written, so every surface shows the same number with the same note.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from sampling_core.runs.stats.bootstrap import mean_interval

__all__ = [
    "PassAtK",
    "ks_for",
    "pass_at_k",
    "pass_at_k_table",
    "pass_hat_k",
    "pass_hat_k_table",
]

BOOTSTRAP_SAMPLES = 1000
SEED = 20210707  # the Codex paper's arXiv date: any fixed number keeps reports reproducible


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass@k for one prompt: ``n`` samples, ``c`` passed."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def pass_hat_k(n: int, c: int, k: int) -> float:
    """The unbiased estimate of pass^k for one prompt: ``n`` samples, ``c`` passed."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass^k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if c < k:
        return 0.0
    every = 1.0
    for i in range(k):
        every *= (c - i) / (n - i)
    return every


def ks_for(n: int) -> list[int]:
    """The k reported for ``n`` samples per prompt: 1, 2, 4, ... up to ``n``."""
    ks, k = [], 1
    while k <= n:
        ks.append(k)
        k *= 2
    return ks


@dataclass(frozen=True, slots=True)
class PassAtK:
    """pass@k (or pass^k) over a run: the mean over prompts and its 95% bootstrap interval."""

    k: int
    value: float
    low: float
    high: float
    prompts: int
    not_known: int = 0
    """Samples nobody could judge (a rescore's cut attempts): left out of ``value``."""
    if_failed: float | None = None
    """The value with those samples counted as failed (only when some are not known)."""
    if_passed: float | None = None
    """The value with those samples counted as passed (only when some are not known)."""
    left_out: int = 0
    """Prompts in the bounds but not in ``value``: they have k samples or more, but fewer
    than k known (``prompts`` + ``left_out`` is the bounds' number of prompts)."""

    def as_dict(self) -> dict[str, float | int]:
        """As JSON-ready data (``not_known``, ``if_failed`` and ``if_passed`` only when some
        samples are not known; ``left_out`` only when a prompt is)."""
        data: dict[str, float | int] = {
            "k": self.k,
            "value": round(self.value, 6),
            "low": round(self.low, 6),
            "high": round(self.high, 6),
            "prompts": self.prompts,
        }
        if self.not_known and self.if_failed is not None and self.if_passed is not None:
            data["not_known"] = self.not_known
            data["if_failed"] = round(self.if_failed, 6)
            data["if_passed"] = round(self.if_passed, 6)
            if self.left_out:
                data["left_out"] = self.left_out
        return data

    def note(self, scale: float = 100.0, unit: str = "%") -> str:
        """The text that goes right beside the value when some samples are not known
        (empty otherwise): how many, and the value's bounds; and, when the bounds are over
        more prompts than the value, how many more, and why."""
        if not self.not_known or self.if_failed is None or self.if_passed is None:
            return ""
        low, high = scale * self.if_failed, scale * self.if_passed
        note = f" ({self.not_known} not known: {low:.1f}{unit} to {high:.1f}{unit})"
        if self.left_out:
            note += (
                f" (bounds over {self.prompts + self.left_out} prompts, the estimate over "
                f"{self.prompts}: {self.left_out} with fewer than {self.k} known samples)"
            )
        return note


Counts = (
    Mapping[tuple[int, int], int]
    | Iterable[tuple[int, int]]
    | Mapping[tuple[int, int, int], int]
    | Iterable[tuple[int, int, int]]
)
"""Each prompt's ``(n, c)`` or ``(n, c, u)`` (``u`` samples not known): a mapping from those
to the number of prompts that have them, or the tuples themselves."""


def pass_at_k_table(
    counts: Counts, *, samples: int = BOOTSTRAP_SAMPLES, seed: int = SEED
) -> list[PassAtK]:
    """pass@k for k = 1, 2, 4, ... from each prompt's ``(n, c)``.

    k goes up to the largest ``n``; each k is estimated over the prompts with at least
    ``k`` samples (a prompt whose backend calls failed may have fewer), and says how many
    those are. Empty when no prompt has a sample. Every prompt is resampled, whatever
    their number (:func:`~sampling_core.runs.stats.bootstrap.bootstrap_means`).
    """
    return _table(pass_at_k, counts, samples, seed)


def pass_hat_k_table(
    counts: Counts, *, samples: int = BOOTSTRAP_SAMPLES, seed: int = SEED
) -> list[PassAtK]:
    """pass^k for k = 1, 2, 4, ... from each prompt's ``(n, c)``: as :func:`pass_at_k_table`
    (the same prompts for each k, the same bootstrap resamples)."""
    return _table(pass_hat_k, counts, samples, seed)


def _table(
    estimate: Callable[[int, int, int], float], counts: Counts, samples: int, seed: int
) -> list[PassAtK]:
    given = Counter(dict(counts)) if isinstance(counts, Mapping) else Counter(counts)
    profiles: Counter[tuple[int, int, int]] = Counter()
    for (n, c, *u), prompts in given.items():
        profiles[(n, c, u[0] if u else 0)] += prompts
    not_known = sum(u * prompts for (_, _, u), prompts in profiles.items())
    table = []
    for k in ks_for(max((n for n, _, _ in profiles), default=0)):
        weights: Counter[float] = Counter()
        for (n, c, _), prompts in profiles.items():
            if n >= k:
                weights[estimate(n, c, k)] += prompts
        # the same resamples for every k and every report
        value, low, high = mean_interval(weights, samples, seed)
        entry = PassAtK(k, value, low, high, sum(weights.values()))
        if not_known:
            entry = PassAtK(
                *(k, value, low, high, entry.prompts, not_known),
                _mean(estimate, profiles, k, passed=False),
                _mean(estimate, profiles, k, passed=True),
                sum(m for (n, _, u), m in profiles.items() if n < k <= n + u),
            )
        table.append(entry)
    return table


def _mean(
    estimate: Callable[[int, int, int], float],
    profiles: Mapping[tuple[int, int, int], int],
    k: int,
    *,
    passed: bool,
) -> float:
    """The mean over prompts with the samples not known counted as passed or as failed."""
    total = size = 0.0
    for (n, c, u), prompts in profiles.items():
        if n + u >= k:
            total += estimate(n + u, c + u if passed else c, k) * prompts
            size += prompts
    return total / size if size else float("nan")
