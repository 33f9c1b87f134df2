"""Tests of ``sampling_core.engine``: one ``sample()`` call, its loop, tally, budgets, launch and
streaming."""
