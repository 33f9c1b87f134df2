"""maj@k: the chance that the majority answer of k samples is right, estimated from n.

A prompt sampled ``n`` times has its samples' answers grouped: two samples vote together
when their answers are the same once normalised (a field check's extracted, normalised
answer; else the majority strategy's normalised text), and a group is right when the field
check passed it (else when its samples passed). A prompt's votes are kept as one
``(size, right)`` pair per group: its *vote profile*.

Draw ``k`` of the ``n`` samples without replacement; the answer most of them give is the
majority answer, and when several answers tie for the most votes each gets an even share
(one of two tied answers right: half a point). maj@k of the prompt is the expected score
over every one of the ``C(n, k)`` draws: the average over all k-subsets, so an unbiased
estimate of maj@k of the model on that prompt (as pass@k's estimator is of pass@k), and it
depends only on the vote profile. A run's maj@k is the mean over its prompts, with the same
95% bootstrap interval over prompts as pass@k (:mod:`sampling_core.runs.stats.passk`).

It is computed exactly, without enumerating the draws: for each right group ``g`` and each
count ``v`` of its samples drawn, the number of ways the other groups can fill the other
``k - v`` draws with at most ``v`` each, counted by how many of them tie at ``v`` (a
dynamic programme over the groups). Integers throughout; one division at the end.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from math import comb
from typing import Any

from sampling_core.runs.stats.bootstrap import mean_interval
from sampling_core.runs.stats.passk import BOOTSTRAP_SAMPLES, SEED, PassAtK, ks_for

__all__ = ["Profile", "maj_at_k", "maj_at_k_table", "maj_ks", "profile_of", "vote_profile"]

Profile = tuple[tuple[int, bool], ...]
"""A prompt's votes: ``(size, right)`` per answer group, sorted (largest first)."""


def profile_of(groups: Iterable[Sequence[Any]]) -> Profile | None:
    """A :data:`Profile` from ``(size, right)`` pairs as a record keeps them (JSON lists);
    ``None`` when they are not that (an older or damaged record)."""
    out = []
    for group in groups:
        if not isinstance(group, list | tuple) or len(group) != 2:
            return None
        size, right = group
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            return None
        if not isinstance(right, bool):
            return None
        out.append((size, right))
    return tuple(sorted(out, reverse=True)) or None


def vote_profile(answers: Iterable[tuple[str | None, bool]]) -> Profile:
    """The profile of samples given as ``(answer, right)``: samples with the same answer
    are one group; a sample with no answer (``None``: nothing could be extracted) votes for
    "no answer", a group that is never right. Samples with one answer but different
    verdicts (a check that judged more than the answer) are one group, right when most of
    them are."""
    sizes: Counter[str | None] = Counter()
    rights: Counter[str | None] = Counter()
    for answer, right in answers:
        sizes[answer] += 1
        rights[answer] += bool(right) and answer is not None
    groups = ((size, 2 * rights[answer] > size) for answer, size in sizes.items())
    return tuple(sorted(groups, reverse=True))


def maj_ks(n: int) -> list[int]:
    """The k reported for maj@k with ``n`` samples per prompt: 1, 2, 4, ... (as pass@k's)
    and ``n`` itself, the vote of every sample."""
    ks = ks_for(n)
    return ks if not ks or ks[-1] == n else [*ks, n]


def maj_at_k(profile: Profile, k: int) -> float:
    """The unbiased maj@k of one prompt from its vote profile (see the module's docstring)."""
    n = sum(size for size, _ in profile)
    if not 1 <= k <= n:
        raise ValueError(f"maj@k needs 1 <= k <= n (n={n}, k={k})")
    return _maj_at_k(tuple(sorted(profile, reverse=True)), k)


@lru_cache(maxsize=4096)
def _maj_at_k(profile: Profile, k: int) -> float:
    n = sum(size for size, _ in profile)
    credit = 0.0
    done: set[tuple[int, bool]] = set()
    for g, (size, right) in enumerate(profile):
        if not right or (size, right) in done:
            continue
        done.add((size, right))
        alike = sum(1 for group in profile if group == (size, right))
        others = [s for h, (s, _) in enumerate(profile) if h != g]
        won = 0.0
        for v in range(1, min(size, k) + 1):
            for ties, ways in enumerate(_others_at_most(tuple(others), k - v, v)):
                if ways:
                    won += comb(size, v) * ways / (ties + 1)
        credit += alike * won
    return credit / comb(n, k)


def _others_at_most(sizes: tuple[int, ...], draws: int, v: int) -> list[int]:
    """``ways[t]``: the ways to make ``draws`` draws from groups of ``sizes``, at most ``v``
    from each, with exactly ``t`` groups drawn ``v`` times."""
    most = draws // v if v else 0
    # table[s][t]: ways to have made s draws so far with t groups at v
    table = [[0] * (most + 1) for _ in range(draws + 1)]
    table[0][0] = 1
    singles = sum(1 for size in sizes if size == 1)  # answers given once: all at once below
    for size in sizes:
        if size == 1:
            continue
        top = min(size, v)
        fresh = [[0] * (most + 1) for _ in range(draws + 1)]
        for made, row in enumerate(table):
            for tied, ways in enumerate(row):
                if not ways:
                    continue
                for x in range(min(top, draws - made) + 1):
                    at_v = tied + (x == v)
                    if at_v <= most:
                        fresh[made + x][at_v] += ways * comb(size, x)
        table = fresh
    if singles:  # j of them drawn: C(singles, j) ways, each tied at v when v is 1
        fresh = [[0] * (most + 1) for _ in range(draws + 1)]
        for made, row in enumerate(table):
            for tied, ways in enumerate(row):
                if not ways:
                    continue
                for j in range(min(singles, draws - made) + 1):
                    at_v = tied + j * (v == 1)
                    if at_v <= most:
                        fresh[made + j][at_v] += ways * comb(singles, j)
        table = fresh
    return table[draws]


def maj_at_k_table(
    profiles: Mapping[Profile, int] | Iterable[Profile],
    *,
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = SEED,
) -> list[PassAtK]:
    """maj@k for k = 1, 2, 4, ... and the largest n (:func:`maj_ks`) from each prompt's
    vote profile (a mapping from profile to the number of prompts with it, or the profiles
    themselves), as pass@k's table: each k over the prompts with at least k samples, with a
    95% bootstrap interval."""
    tally = Counter(dict(profiles)) if isinstance(profiles, Mapping) else Counter(profiles)
    sizes = {profile: sum(size for size, _ in profile) for profile in tally}
    table = []
    for k in maj_ks(max(sizes.values(), default=0)):
        weights: Counter[float] = Counter()
        for profile, prompts in tally.items():
            if sizes[profile] >= k:
                weights[maj_at_k(profile, k)] += prompts
        value, low, high = mean_interval(weights, samples, seed)
        table.append(PassAtK(k, value, low, high, sum(weights.values())))
    return table
