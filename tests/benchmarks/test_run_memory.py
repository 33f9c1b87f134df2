"""``python -m benchmarks.run_memory --quick`` measures each step and reports numbers (no
memory or time asserted: the benchmark measures, ``reliability/test_run_memory`` asserts)."""

from __future__ import annotations

from tests.support.benchmark_helpers import quick_report


def test_quick_mode_measures_run_resume_report_and_view() -> None:
    rows = quick_report("benchmarks.run_memory")["rows"]
    assert [(r["step"], r["prompts"]) for r in rows] == [
        ("run", 300),
        ("resume", 300),
        ("report", 300),
        ("view", 300),
    ]
    for row in rows:
        assert row["rss_peak_mb"] >= row["rss_before_mb"] > 0 and row["seconds"] > 0
    assert rows[2]["output_kb"] > 0 and rows[3]["output_kb"] > 0  # the JSON, the page
