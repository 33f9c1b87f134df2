"""Tests of ``samplehooks view`` (``sampling_core.view``)."""
