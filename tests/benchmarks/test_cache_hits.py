"""``python -m benchmarks.cache_hits`` runs: each case's call is a hit on one side and asks the
backend on the other (the timings themselves are the benchmark's, never asserted here)."""

from __future__ import annotations

import asyncio

from benchmarks import cache_hits


def test_each_case_is_measured_hit_against_no_cache() -> None:
    figures = asyncio.run(cache_hits.measure(calls=2, repeats=1))
    assert set(figures) == set(cache_hits.CASES)
    for row in figures.values():
        assert set(row) == {
            *("hit_us", "no_cache_us", "ratio"),
            *("hit_cpu_us", "no_cache_cpu_us", "cpu_ratio"),
        }
        assert all(value > 0 for value in row.values())
