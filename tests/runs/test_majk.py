"""maj@k: the exact estimator against every k-subset, vote profiles, and the run's table."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from fractions import Fraction

import pytest

from sampling_core.runs.stats.majk import (
    maj_at_k,
    maj_at_k_table,
    maj_ks,
    profile_of,
    vote_profile,
)


def _brute_force(samples: list[tuple[str, bool]], k: int) -> Fraction:
    """The average over every k-subset of the samples of the majority's score (ties split)."""
    total, draws = Fraction(0), 0
    for subset in itertools.combinations(range(len(samples)), k):
        votes = Counter(samples[i][0] for i in subset)
        best = max(votes.values())
        top = [answer for answer, count in votes.items() if count == best]
        right = {answer for answer, ok in samples if ok}
        total += Fraction(sum(answer in right for answer in top), len(top))
        draws += 1
    return total / draws


def _samples(profile: tuple[tuple[int, bool], ...]) -> list[tuple[str, bool]]:
    return [(f"answer{g}", right) for g, (size, right) in enumerate(profile) for _ in range(size)]


SMALL_PROFILES = [
    ((1, True),),
    ((3, True), (2, False)),
    ((2, True), (2, False)),
    ((2, False), (1, True), (1, False), (1, False)),
    ((3, False), (3, True), (1, False)),
    ((2, True), (2, True), (2, False), (1, False)),  # two right answers (a list of accepted)
    ((4, False), (1, True), (1, True), (1, False)),
    ((1, False), (1, True), (1, False), (1, False), (1, False), (1, False)),
    ((5, True), (3, False)),
]


@pytest.mark.parametrize("profile", SMALL_PROFILES)
def test_maj_at_k_equals_the_average_over_every_k_subset(profile) -> None:
    n = sum(size for size, _ in profile)
    for k in range(1, n + 1):
        exact = _brute_force(_samples(profile), k)
        assert maj_at_k(profile, k) == pytest.approx(float(exact), abs=1e-12), (profile, k)


def test_random_profiles_against_brute_force() -> None:
    rng = random.Random(7)
    for _ in range(40):
        groups = rng.randint(1, 5)
        profile = tuple((rng.randint(1, 3), rng.random() < 0.4) for _ in range(groups))
        n = sum(size for size, _ in profile)
        k = rng.randint(1, n)
        assert maj_at_k(profile, k) == pytest.approx(
            float(_brute_force(_samples(profile), k)), abs=1e-12
        )


def test_known_values() -> None:
    # maj@1 is the share of right samples; maj@n is the majority of all of them.
    assert maj_at_k(((3, True), (2, False)), 1) == pytest.approx(0.6)
    assert maj_at_k(((3, True), (2, False)), 5) == 1.0
    assert maj_at_k(((2, True), (2, False)), 4) == 0.5  # a tie: half a point
    assert maj_at_k(((4, False),), 2) == 0.0
    # three of five draws from 3 right, 2 wrong (one answer each): right unless 2 wrong drawn
    # with one right: C(3,1)*C(2,2)/C(5,3) = 3/10 wrong
    assert maj_at_k(((3, True), (2, False)), 3) == pytest.approx(0.7)


def test_impossible_k_is_refused() -> None:
    with pytest.raises(ValueError, match="maj@k needs"):
        maj_at_k(((2, True),), 3)


def test_vote_profile_groups_answers_and_no_answer_is_wrong() -> None:
    profile = vote_profile([("12", True), ("12", True), ("7", False), (None, False), (None, True)])
    assert profile == ((2, True), (2, False), (1, False))
    # the same answer judged differently is one group, right when most of it passed
    assert vote_profile([("x", True), ("x", False), ("x", True)]) == ((3, True),)


def test_profile_of_reads_what_a_record_keeps_and_refuses_the_rest() -> None:
    assert profile_of([[1, False], [3, True]]) == ((3, True), (1, False))
    assert profile_of([[0, True]]) is None
    assert profile_of([[1, 1]]) is None
    assert profile_of(["x"]) is None
    assert profile_of([]) is None


def test_table_means_over_prompts_with_intervals() -> None:
    profiles = [((3, True), (1, False)), ((2, False), (2, True)), ((4, False),), ((4, True),)]
    table = maj_at_k_table(profiles)
    assert [p.k for p in table] == [1, 2, 4]
    for p in table:
        expected = sum(maj_at_k(pr, p.k) for pr in profiles) / len(profiles)
        assert p.value == pytest.approx(expected)
        assert p.low <= p.value <= p.high
        assert p.prompts == 4
    assert maj_at_k_table(profiles) == table
    assert maj_at_k_table([]) == []


def test_maj_at_k_reports_the_vote_of_every_sample_too() -> None:
    assert maj_ks(8) == [1, 2, 4, 8]
    assert maj_ks(5) == [1, 2, 4, 5]
    assert maj_ks(1) == [1] and maj_ks(0) == []
    five = [((3, True), (2, False)), ((5, False),)]
    table = maj_at_k_table(five)
    assert [p.k for p in table] == [1, 2, 4, 5]
    assert table[-1].value == 0.5  # the first prompt's majority of all 5 is right
