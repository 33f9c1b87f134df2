"""Tests of ``benchmarks``: each one runs and reports numbers (speed is never asserted)."""
