"""Paired statistics: McNemar's exact test, the paired bootstrap's coverage, the verdicts."""

from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction
from math import comb

import pytest

from sampling_core.runs.stats.paired import (
    A_BETTER,
    B_BETTER,
    TIED,
    detectable_difference,
    mcnemar_exact,
    paired_difference,
    verdict,
)


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        (1, 6, Fraction(2 * (1 + 7), 2**7)),  # 0.125
        (6, 1, Fraction(2 * (1 + 7), 2**7)),
        (0, 5, Fraction(2, 2**5)),  # 0.0625
        (2, 10, Fraction(2 * (1 + 12 + 66), 2**12)),  # 0.03857...
        (0, 1, Fraction(1)),  # 2 * 1/2 = 1
        (3, 3, Fraction(1)),  # capped at 1
        (0, 0, Fraction(1)),  # nothing differs
        (4, 11, Fraction(2 * (1 + 15 + 105 + 455 + 1365), 2**15)),  # 0.1185...
    ],
)
def test_mcnemar_matches_the_exact_binomial_by_hand(b: int, c: int, expected: Fraction) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(float(expected), rel=1e-12)


def test_mcnemar_with_many_discordant_prompts_matches_exact_integers() -> None:
    b, c = 2950, 3150  # over the exact-integer limit: summed in log space
    n = b + c
    exact = Fraction(2 * sum(comb(n, i) for i in range(min(b, c) + 1)), 2**n)
    assert mcnemar_exact(b, c) == pytest.approx(float(exact), rel=1e-9)
    assert 0.0 < mcnemar_exact(b, c) < 0.05


def test_mcnemar_refuses_negative_counts() -> None:
    with pytest.raises(ValueError, match="counts >= 0"):
        mcnemar_exact(-1, 2)


def test_verdicts() -> None:
    assert verdict(0.01, 0.2) == B_BETTER
    assert verdict(-0.2, -0.01) == A_BETTER
    assert verdict(-0.1, 0.1) == TIED
    assert verdict(0.0, 0.0) == TIED  # an interval at 0 covers it


def _covers(pairs: Counter, truth: float) -> bool:
    found = paired_difference("pass@1", pairs, resamples=400)
    assert found is not None
    return found.low <= truth <= found.high


def test_the_paired_interval_covers_a_known_effect_95_percent_of_the_time() -> None:
    # one sample per prompt: (A, B) is (1, 1) .5, (0, 1) .15, (1, 0) .05, (0, 0) .3
    rng = random.Random(2024)
    outcomes = [(1.0, 1.0), (0.0, 1.0), (1.0, 0.0), (0.0, 0.0)]
    weights = [0.5, 0.15, 0.05, 0.3]
    truth = 0.15 - 0.05
    runs = 300
    covered = sum(
        _covers(Counter(rng.choices(outcomes, weights, k=150)), truth) for _ in range(runs)
    )
    assert 0.91 <= covered / runs <= 0.98, covered / runs


def test_the_clustered_interval_covers_a_known_effect_with_several_samples_per_prompt() -> None:
    # prompts of four difficulties; B solves each 10 points more often; 4 samples each
    rng = random.Random(99)
    n, truth, runs = 4, 0.1, 300

    def passes(p: float) -> int:
        return sum(rng.random() < p for _ in range(n))

    covered = 0
    for _ in range(runs):
        pairs: Counter = Counter()
        for _ in range(120):
            q = rng.choice((0.1, 0.3, 0.5, 0.7))
            pairs[(passes(q) / n, passes(q + truth) / n)] += 1
        covered += _covers(pairs, truth)
    assert 0.91 <= covered / runs <= 0.98, covered / runs


def test_a_paired_difference_reports_means_counts_and_a_test() -> None:
    pairs = Counter({(1.0, 1.0): 50, (0.0, 1.0): 12, (1.0, 0.0): 2, (0.0, 0.0): 36})
    found = paired_difference("success_rate", pairs)
    assert found is not None
    assert (found.prompts, found.a, found.b) == (100, 0.52, 0.62)
    assert found.difference == pytest.approx(0.10)
    assert (found.only_a, found.only_b) == (2, 12)
    assert found.p_value == pytest.approx(mcnemar_exact(2, 12))
    assert found.low > 0 and found.verdict == B_BETTER
    assert found.detectable is not None and 0 < found.detectable < 0.2
    assert paired_difference("success_rate", Counter()) is None


def test_no_test_for_a_measure_that_is_not_pass_or_fail() -> None:
    found = paired_difference("pass@1", Counter({(0.25, 0.5): 3, (0.5, 0.5): 4}))
    assert found is not None and found.p_value is None and found.only_a is None


def test_the_smallest_detectable_difference_shrinks_with_more_prompts() -> None:
    few = detectable_difference(Counter({1.0: 5, -1.0: 5, 0.0: 90}))
    many = detectable_difference(Counter({1.0: 50, -1.0: 50, 0.0: 900}))
    assert few is not None and many is not None
    assert few / many == pytest.approx(10**0.5, rel=0.02)  # ten times the prompts
    # sd of the differences: sqrt(10/99); 2.8016 * sd / sqrt(100)
    assert few == pytest.approx(2.8016 * (10 / 99) ** 0.5 / 10, rel=1e-3)
    # nothing differed: as if one prompt had differed by 1
    assert detectable_difference(Counter({0.0: 100})) == pytest.approx(2.8016 / 100, rel=1e-3)
    assert detectable_difference(Counter({0.0: 1})) is None
