"""Tests of ``sampling_core.runs``: batch runs, their directory, resume, reports, rescore."""
