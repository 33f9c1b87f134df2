"""pass@k: the unbiased estimator, its bootstrap intervals, and ``early_exit=False`` runs."""

from __future__ import annotations

import itertools
import random
import statistics
from collections import Counter
from math import comb, fsum
from typing import Any

import pytest

from sampling_core import Sampler, ScriptedBackend
from sampling_core.requirements.checks import max_words
from sampling_core.runs.stats import bootstrap
from sampling_core.runs.stats.bootstrap import binomial, bootstrap_means
from sampling_core.runs.stats.passk import (
    ks_for,
    pass_at_k,
    pass_at_k_table,
    pass_hat_k,
    pass_hat_k_table,
)

pytestmark = pytest.mark.anyio


def test_the_product_form_equals_the_binomial_form() -> None:
    for n in range(1, 13):
        for c, k in itertools.product(range(n + 1), range(1, n + 1)):
            exact = 1 - comb(n - c, k) / comb(n, k)
            assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12), (n, c, k)


def test_large_n_stays_finite_and_in_range() -> None:
    value = pass_at_k(2000, 3, 100)
    assert 0.0 < value < 1.0
    assert value == pytest.approx(1 - comb(1997, 100) / comb(2000, 100), rel=1e-9)


@pytest.mark.parametrize(("n", "c", "k"), [(4, 5, 1), (4, -1, 1), (4, 1, 0), (4, 1, 5)])
def test_impossible_counts_are_refused(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError, match="pass@k needs"):
        pass_at_k(n, c, k)


def test_ks_are_powers_of_two_up_to_n() -> None:
    assert ks_for(8) == [1, 2, 4, 8]
    assert ks_for(6) == [1, 2, 4]
    assert ks_for(1) == [1]
    assert ks_for(0) == []


def test_table_means_over_prompts_and_brackets_them_reproducibly() -> None:
    counts = [(8, c) for c in (0, 1, 2, 8, 4, 0, 3, 5)]
    table = pass_at_k_table(counts)
    assert [p.k for p in table] == [1, 2, 4, 8]
    for p in table:
        expected = sum(pass_at_k(n, c, p.k) for n, c in counts) / len(counts)
        assert p.value == pytest.approx(expected)
        assert 0.0 <= p.low <= p.value <= p.high <= 1.0
        assert p.low < p.high  # the prompts disagree, so the interval has width
        assert p.prompts == 8
    assert pass_at_k_table(counts) == table  # seeded: the same report every time
    values = [p.value for p in table]
    assert values == sorted(values)  # pass@k never falls as k grows


def test_each_k_uses_the_prompts_with_enough_samples() -> None:
    table = pass_at_k_table([(8, 2), (8, 8), (3, 0)])
    assert [(p.k, p.prompts) for p in table] == [(1, 3), (2, 3), (4, 2), (8, 2)]
    assert pass_at_k_table([]) == [] and pass_at_k_table([(0, 0)]) == []


def test_one_prompt_has_a_zero_width_interval() -> None:
    (p,) = pass_at_k_table([(1, 1)])
    assert (p.value, p.low, p.high) == (1.0, 1.0, 1.0)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 3, 2, 3 / 10),  # C(3,2)/C(5,2): 3 of the 10 pairs both pass
        (8, 6, 4, 15 / 70),  # C(6,4)/C(8,4)
        (10, 5, 1, 1 / 2),  # k=1: the share that passed
        (4, 4, 4, 1.0),  # every sample passed
        (4, 2, 3, 0.0),  # fewer passes than k: never all k
        (6, 0, 1, 0.0),
    ],
)
def test_pass_hat_k_of_one_prompt_is_the_hand_computed_value(
    n: int, c: int, k: int, expected: float
) -> None:
    assert pass_hat_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_hat_k_equals_the_binomial_form_and_never_exceeds_pass_at_k() -> None:
    for n in range(1, 13):
        for c, k in itertools.product(range(n + 1), range(1, n + 1)):
            exact = comb(c, k) / comb(n, k)
            assert pass_hat_k(n, c, k) == pytest.approx(exact, abs=1e-12), (n, c, k)
            assert pass_hat_k(n, c, k) <= pass_at_k(n, c, k) + 1e-12
    with pytest.raises(ValueError, match="pass\\^k needs"):
        pass_hat_k(4, 5, 1)


def test_pass_hat_k_table_means_over_prompts_with_pass_at_ks_intervals() -> None:
    counts = [(4, 4), (4, 2), (4, 0)]
    table = pass_hat_k_table(counts)
    # pass^1 = (1 + 1/2 + 0)/3; pass^2 = (1 + C(2,2)/C(4,2) + 0)/3 = (1 + 1/6)/3; pass^4 = 1/3
    assert [(p.k, round(p.value, 6), p.prompts) for p in table] == [
        (1, 0.5, 3),
        (2, round(7 / 18, 6), 3),
        (4, round(1 / 3, 6), 3),
    ]
    for p in table:
        assert 0.0 <= p.low <= p.value <= p.high <= 1.0
    # k = 1: pass^1 and pass@1 are the same numbers, so the same resamples give the same interval
    assert table[0] == pass_at_k_table(counts)[0]
    values = [p.value for p in table]
    assert values == sorted(values, reverse=True)  # pass^k never rises as k grows


async def test_early_exit_false_runs_every_subsample() -> None:
    replies = ["short", "far too many words for the check here"] * 4
    sampler = Sampler(ScriptedBackend(replies), load_entrypoints=False)
    result = await sampler.sample(
        "q", requirements=[max_words(3)], concurrency_budget=8, early_exit=False
    )
    assert result.success
    assert result.iterations_used == 8 and result.cancelled == 0
    assert sum(a.passed for a in result.attempts) == 4


async def test_early_exit_false_still_stops_a_subsample_at_its_pass() -> None:
    # Each subsample fails once, then passes: with loop_budget 4 it makes two attempts.
    def reply(request) -> str:
        return "ok" if request.iteration.attempt >= 2 else "not ok at all here"

    sampler = Sampler(ScriptedBackend(reply), load_entrypoints=False)
    for selection in ("first", "ordered"):
        result = await sampler.sample(
            "q",
            requirements=[max_words(1)],
            loop_budget=4,
            concurrency_budget=3,
            early_exit=False,
            selection=selection,
        )
        assert result.iterations_used == 6, selection
        assert sorted((a.subsample_index, a.attempt) for a in result.attempts if a.passed) == [
            (0, 2),
            (1, 2),
            (2, 2),
        ]


async def test_early_exit_must_be_a_bool() -> None:
    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False)
    with pytest.raises(TypeError, match="early_exit must be a bool"):
        await sampler.sample("q", early_exit="no")  # type: ignore[arg-type]


def _bootstrap_by_prompt(counts: list[tuple[int, int]], k: int) -> tuple[float, float]:
    """The interval as resampling prompt by prompt gives it (the textbook bootstrap)."""
    rng = random.Random(5)
    values = [pass_at_k(n, c, k) for n, c in counts]
    means = sorted(fsum(rng.choices(values, k=len(values))) / len(values) for _ in range(1000))
    return means[24], means[974]


def test_the_bootstrap_over_counts_agrees_with_resampling_each_prompt() -> None:
    rng = random.Random(3)
    counts = [(8, min(8, int(rng.expovariate(0.4)))) for _ in range(600)] + [(3, 1)] * 40
    for p in pass_at_k_table(counts):
        low, high = _bootstrap_by_prompt([(n, c) for n, c in counts if n >= p.k], p.k)
        assert p.low == pytest.approx(low, abs=0.006), p
        assert p.high == pytest.approx(high, abs=0.006), p
        assert p.low < p.value < p.high
    assert pass_at_k_table(Counter(counts)) == pass_at_k_table(counts)  # counts, or pairs


def test_the_bootstrap_draws_as_much_for_a_million_prompts_as_for_a_thousand(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    draws: list[int] = []

    class Counting(random.Random):
        def random(self) -> float:
            draws[-1] += 1
            return super().random()

    monkeypatch.setattr(bootstrap.random, "Random", Counting)
    tables = []
    for scale in (100, 100_000):
        draws.append(0)
        tables.append(pass_at_k_table({(4, c): scale * (c + 1) for c in range(5)}))
    small, large = draws
    assert large < 2 * small  # resampling a category costs the same, whatever its size
    assert [p.prompts for p in tables[1]] == [1_500_000] * 3  # every prompt, no cap
    assert tables[1][0].low < tables[1][0].value < tables[1][0].high


@pytest.mark.parametrize(("n", "p"), [(7, 0.3), (60, 0.1), (400, 0.35), (10**6, 0.02), (50, 0.9)])
def test_binomial_draws_have_the_binomial_mean_and_variance(n: int, p: float) -> None:
    rng = random.Random(11)
    draws = [binomial(n, p, rng) for _ in range(20_000)]
    assert all(0 <= x <= n for x in draws)
    assert statistics.fmean(draws) == pytest.approx(n * p, rel=0.02)
    assert statistics.pvariance(draws) == pytest.approx(n * p * (1 - p), rel=0.05)


def test_binomial_edges() -> None:
    rng = random.Random(1)
    assert binomial(0, 0.5, rng) == 0 and binomial(9, 0.0, rng) == 0 and binomial(9, 1.0, rng) == 9
    assert bootstrap_means({}, 10, rng) == []
    assert bootstrap_means({0.25: 7}, 3, rng) == [0.25, 0.25, 0.25]


def test_samples_not_known_give_each_k_its_bounds_counted_failed_and_counted_passed() -> None:
    """(n, c, u): the estimate over the n known samples, and the bounds with the u not known
    counted failed, (n + u, c), and counted passed, (n + u, c + u); plain pairs have none."""
    (at_1,) = pass_at_k_table({(1, 1, 0): 3, (0, 0, 1): 1})
    assert (at_1.value, at_1.prompts, at_1.not_known) == (1.0, 3, 1)
    assert (at_1.if_failed, at_1.if_passed) == (0.75, 1.0)
    assert at_1.note().strip() == (  # the prompt none of whose samples is known
        "(1 not known: 75.0% to 100.0%) (bounds over 4 prompts, the estimate over 3: 1 with "
        "fewer than 1 known samples)"
    )
    assert at_1.as_dict()["if_failed"] == 0.75
    hat = pass_hat_k_table({(2, 2, 1): 1})
    assert [(p.k, p.value, p.if_failed, p.if_passed) for p in hat] == [
        (1, 1.0, 2 / 3, 1.0),
        (2, 1.0, pass_hat_k(3, 2, 2), 1.0),
    ]
    (plain,) = pass_at_k_table({(1, 1): 3})
    assert plain.not_known == 0 and "if_failed" not in plain.as_dict() and plain.note() == ""


def test_a_prompt_with_fewer_than_k_known_samples_is_left_out_of_the_estimate_and_said() -> None:
    """(n, c, u) with n < k <= n + u: in the bounds of k, not in its estimate; the entry
    counts it, and its note says the two are over different prompts."""
    at_1, at_2 = pass_hat_k_table({(2, 2, 0): 1, (1, 0, 1): 1})
    assert (at_1.prompts, at_1.left_out) == (2, 0)  # both have a known sample
    assert "left out" not in at_1.note() and "left_out" not in at_1.as_dict()
    # pass^2: (2, 2) alone in the estimate, 1.0; bounds over both, with (2, 0) and (2, 1)
    assert (at_2.value, at_2.prompts, at_2.left_out) == (1.0, 1, 1)
    assert (at_2.if_failed, at_2.if_passed) == (0.5, 0.5)  # the estimate is outside them
    assert at_2.as_dict()["left_out"] == 1
    assert at_2.note() == (
        " (1 not known: 50.0% to 50.0%) (bounds over 2 prompts, the estimate over 1: 1 with "
        "fewer than 2 known samples)"
    )


@pytest.mark.parametrize("table", [pass_at_k_table, pass_hat_k_table])
def test_bounds_over_the_estimates_own_prompts_hold_it(table: Any) -> None:
    # every profile (n, c, u) of up to 4 samples, two prompts at a time: whenever no prompt
    # is left out, the bounds are over the estimate's prompts and hold it
    profiles = [(n, c, u) for n in range(5) for c in range(n + 1) for u in range(5 - n)]
    for a in profiles:
        for b in profiles:
            for entry in table([a, b], samples=20):
                if entry.not_known and not entry.left_out:
                    assert entry.if_failed is not None and entry.if_passed is not None
                    assert entry.if_failed - 1e-12 <= entry.value <= entry.if_passed + 1e-12
