"""Tests of ``sampling_core.events``: recorded hook events read back."""
