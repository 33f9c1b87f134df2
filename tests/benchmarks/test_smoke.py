"""The benchmarks' smoke mode runs every scenario and reports numbers (no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = {
    "cost per attempt",
    "concurrency scaling",
    "early exit",
    "many calls",
    "hooks",
    "background observer",
    "recorder",
    "anyio task group",
}
# Run the benchmarks with Mellea made unimportable, as on a machine without the bench extra.
WITHOUT_MELLEA = (
    "import runpy, sys; sys.modules['mellea'] = None; "
    "sys.argv = ['benchmarks', *sys.argv[1:]]; "
    "runpy.run_module('benchmarks', run_name='__main__')"
)


def run_benchmarks(*args: str, hide_mellea: bool = False) -> tuple[list[str], dict]:
    command = [sys.executable, *(["-c", WITHOUT_MELLEA] if hide_mellea else ["-m", "benchmarks"])]
    done = subprocess.run(
        [*command, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    return lines, json.loads(lines[-1])


def test_quick_mode_runs_every_scenario_and_reports_numbers():
    # Mellea comes with the test extra (through the bench extra): its baseline runs here, so
    # a broken Mellea baseline fails this test instead of reading "n/a".
    lines, report = run_benchmarks("--quick")
    assert report["machine"]["versions"]["mellea"] == "0.8.0"
    rows = report["rows"]
    assert {row["scenario"] for row in rows} == SCENARIOS
    for row in rows:
        for implementation in ("engine", "bare", "mellea"):
            value = row["values"][implementation]
            if row["metric"] == "tasks left behind":
                assert value == 0, row
            else:
                assert isinstance(value, int | float) and value > 0, row
        timed = row["metric"] in ("µs/attempt", "x ideal 20 ms", "ms to return", "wall ms")
        if timed:  # both ratios: of the medians (computed from values) and paired
            assert set(row["paired"]) == {"engine/bare", "mellea/engine"}, row
            assert all(value > 0 for value in row["paired"].values()), row
    settings = {row["setting"] for row in rows if row["scenario"] == "concurrency scaling"}
    assert {s.rsplit("=", 1)[1] for s in settings} == {"1", "8", "64", "512"}
    floors = [row["values"]["floor"] for row in rows if row["scenario"] == "concurrency scaling"]
    assert len(floors) == 4 and all(value >= 1 for value in floors)  # never under the latency
    hooks = {row["setting"].rsplit(", ", 1)[1] for row in rows if row["scenario"] == "hooks"}
    assert hooks == {
        "no plugin",
        "trivial plugin on every hook",
        "trivial plugin passed to every call",
        "tracing plugin",
    }
    for row in rows:
        if row["setting"].endswith("trivial plugin on every hook"):
            [check] = row["checks"]
            assert check["value"] == row["notes"]["median_of_paired_ratios"] > 0
    cancelled = next(r for r in rows if r["metric"] == "siblings cancelled")
    assert cancelled["values"]["engine"] == cancelled["values"]["bare"] == 7
    assert cancelled["values"]["mellea"] == 7
    assert any(line.startswith("| scenario ") and "| paired " in line for line in lines)
    assert any(line.startswith("| cost per attempt") for line in lines)  # the table
    assert report["summary"]["met"] + report["summary"]["missed"] > 0


def test_without_mellea_its_column_is_na_and_the_rest_still_runs():
    _, report = run_benchmarks("--quick", "--only", "cost_per_attempt,early_exit", hide_mellea=True)
    rows = report["rows"]
    assert {row["scenario"] for row in rows} == {"cost per attempt", "early exit"}
    assert all(row["values"]["mellea"] is None for row in rows)
    assert all(row["values"]["engine"] is not None for row in rows)
    targets = [c for row in rows for c in row["checks"] if c["label"] == "Mellea/engine"]
    assert targets and all(c["met"] is None for c in targets)  # "n/a", not a failure
    assert report["machine"]["versions"]["samplehooks"]
