"""A test that configures structlog (as an application would) leaves the next test with
structlog as it was: not configured, so the library's own default-output rules apply."""

from __future__ import annotations

import structlog


def test_first_an_application_configures_structlog() -> None:
    structlog.configure(processors=[structlog.processors.JSONRenderer()])
    assert structlog.is_configured()


def test_then_the_next_test_sees_structlog_unconfigured() -> None:
    assert not structlog.is_configured()
    processors = structlog.get_config()["processors"]
    assert not any(isinstance(p, structlog.processors.JSONRenderer) for p in processors)
