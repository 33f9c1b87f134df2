"""Tests of ``sampling_core.requirements``: the built-in checks, the dataset-field checks and the
judge."""
