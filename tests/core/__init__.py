"""Tests of ``sampling_core``'s top-level modules: prices and secret scrubbing."""
