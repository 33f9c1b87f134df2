"""``python -m benchmarks.cache_hits`` runs: each case's call is a hit on one side and asks the
backend on the other (the timings themselves are the benchmark's, never asserted here)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("case", list(cache_hits.CASES))
def test_a_counted_child_makes_its_hits_with_the_read_in_the_loops_thread(case: str) -> None:
    # what a counted run does, without valgrind: every call is a hit, read in this thread
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.cache_hits", "--child", case, "3"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
