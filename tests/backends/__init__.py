"""Tests of ``sampling_core.backends``: the real backends, transport retries and limits, the
response cache."""
