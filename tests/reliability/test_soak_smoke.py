"""The soak's short form, as the benchmarks' smoke mode runs it: ``python -m benchmarks.soak``.

A benchmark, run here only so CI runs it (in a child process, like ``--quick``): 1,000
``sample()`` calls with random faults must leave no memory behind (within the soak's
margin of allocated blocks), no task running, and one ``sampling_loop_end`` per call.
Nothing here is timed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_soak_short_form_leaves_nothing_behind() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.soak", "--calls", "1000"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    *lines, last = done.stdout.strip().splitlines()
    report = json.loads(last)["soak"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert report["passed"] and report["calls"] == 1000
    assert report["loop_ends"] == 1000 and report["tasks_left"] == 0
    assert report["growth"] <= report["margin_blocks"]
    # every way a call can end was exercised
    assert {"success", "budget_exhausted", "stopped_by_plugin", "cancelled", "PluginError"} <= set(
        report["outcomes"]
    )
    assert lines[-1] == "soak: PASS"
