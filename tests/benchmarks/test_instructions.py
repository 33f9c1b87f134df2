"""The instruction-count benchmark: its child runs, and the arithmetic around callgrind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import instructions

ROOT = Path(__file__).resolve().parents[2]
POINTS = "schedule points: after 100 ms without a yield"  # 1 ms, scaled for callgrind


def child(variant: str, calls: int, concurrency: int, **env: str) -> list[str]:
    """What a counted run prints, run as ``count`` runs it (without valgrind)."""
    counts = (str(calls), str(concurrency))
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.instructions", "--child", variant, *counts],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_counted_run_makes_its_calls_with_its_variants_plugins_and_runner():
    # Every attempt fails, so each sample() call makes loop_budget x concurrency attempts.
    calls = f"backend calls: {(instructions.WARMUP + 5) * instructions.LOOP_BUDGET * 2}"
    expected = {
        "no plugin": [calls, "plugins: none", "subsample runner: subsample_tasks", POINTS],
        "trivial plugin on every hook": [
            calls,
            "plugins: TrivialPlugin",
            "subsample runner: subsample_tasks",
            POINTS,
        ],
        instructions.TASK_GROUP: [
            calls,
            "plugins: none",
            "subsample runner: AnyioSubsampleTasks",
            POINTS,
        ],
    }
    assert set(expected) == {*instructions.VARIANTS, instructions.TASK_GROUP}
    for variant in expected:
        assert child(variant, 5, 2) == expected[variant], variant


def test_the_count_is_read_from_callgrinds_output():
    output = "==4242== Events    : Ir\n==4242== Collected : 2,315,130,986\n==4242== I   refs: ..."
    assert instructions.collected(output) == 2_315_130_986
    with pytest.raises(RuntimeError, match="no instruction count"):
        instructions.collected("valgrind: command not found")


def test_per_attempt_divides_the_difference_of_two_runs(monkeypatch):
    # Start-up costs the same in both runs; each call makes LOOP_BUDGET * concurrency attempts.
    def fake_count(variant, calls, concurrency, schedule_points=True):
        return 5_000_000 + calls * instructions.LOOP_BUDGET * concurrency * 60_000

    monkeypatch.setattr(instructions, "count", fake_count)
    assert instructions.per_attempt("no plugin", 4) == 60_000


def test_without_schedule_points_the_counted_runs_never_reach_one(monkeypatch):
    # Schedule points follow wall time, so under load a run counts more of them: the option
    # is passed to every counted child, which then makes the interval endless.
    asked = []

    def fake_count(variant, calls, concurrency, schedule_points=True):
        asked.append(schedule_points)
        return calls

    monkeypatch.setattr(instructions, "count", fake_count)
    instructions.per_attempt("no plugin", 1, schedule_points=False)
    assert asked == [False, False]
    off = child("no plugin", 1, 1, **{instructions.NO_SCHEDULE_POINTS: "1"})
    assert off[-1] == "schedule points: off"
