"""Tests of the ``samplehooks`` command line (``sampling_core.cli``)."""
