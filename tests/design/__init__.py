"""Tests of the project's rules, checked across the tree: one-way layering, the public surface,
exception text, package docstrings, test isolation."""
