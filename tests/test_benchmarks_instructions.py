"""The instruction-count benchmark: its child runs, and the arithmetic around callgrind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import instructions

ROOT = Path(__file__).resolve().parent.parent


def test_a_counted_run_makes_its_calls_with_its_variants_plugins_and_runner():
    # Every attempt fails, so each sample() call makes loop_budget x concurrency attempts.
    calls = f"backend calls: {(instructions.WARMUP + 5) * instructions.LOOP_BUDGET * 2}"
    expected = {
        "no plugin": [calls, "plugins: none", "subsample runner: subsample_tasks"],
        "trivial plugin on every hook": [
            calls,
            "plugins: TrivialPlugin",
            "subsample runner: subsample_tasks",
        ],
        instructions.TASK_GROUP: [calls, "plugins: none", "subsample runner: AnyioSubsampleTasks"],
    }
    assert set(expected) == {*instructions.VARIANTS, instructions.TASK_GROUP}
    for variant in expected:
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.instructions", "--child", variant, "5", "2"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == expected[variant], variant


def test_the_count_is_read_from_callgrinds_output():
    output = "==4242== Events    : Ir\n==4242== Collected : 2,315,130,986\n==4242== I   refs: ..."
    assert instructions.collected(output) == 2_315_130_986
    with pytest.raises(RuntimeError, match="no instruction count"):
        instructions.collected("valgrind: command not found")


def test_per_attempt_divides_the_difference_of_two_runs(monkeypatch):
    # Start-up costs the same in both runs; each call makes LOOP_BUDGET * concurrency attempts.
    def fake_count(variant, calls, concurrency):
        return 5_000_000 + calls * instructions.LOOP_BUDGET * concurrency * 60_000

    monkeypatch.setattr(instructions, "count", fake_count)
    assert instructions.per_attempt("no plugin", 4) == 60_000
