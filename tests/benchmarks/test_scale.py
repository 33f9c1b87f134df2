"""``python -m benchmarks.scale --quick`` runs and reports numbers (no timing asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_mode_measures_each_row() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.scale", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    rows = report["rows"]
    assert [(r["executor"], r["latency_ms"], r["prompts"]) for r in rows] == [
        ("local", 0.0, 300),
        ("local", 20.0, 300),
    ]
    for row in rows:
        assert row["prompts_per_s"] > 0 and row["rss_peak_mb"] >= row["rss_before_mb"] > 0
