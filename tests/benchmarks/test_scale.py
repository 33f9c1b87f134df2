"""``python -m benchmarks.scale --quick`` runs and reports numbers (no timing asserted)."""

from __future__ import annotations

from tests.support.benchmark_helpers import quick_report


def test_quick_mode_measures_each_row() -> None:
    report = quick_report("benchmarks.scale")
    rows = report["rows"]
    assert [(r["executor"], r["latency_ms"], r["prompts"]) for r in rows] == [
        ("local", 0.0, 300),
        ("local", 20.0, 300),
    ]
    for row in rows:
        assert row["prompts_per_s"] > 0 and row["rss_peak_mb"] >= row["rss_before_mb"] > 0
