"""Tests of the pytest kit for plugin authors (``sampling_core.testing`` and
``sampling_core.pytest_plugin``)."""
