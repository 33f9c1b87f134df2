"""Shared fixtures: every async test runs under asyncio and trio."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(autouse=True)
def _structlog_configuration_restored() -> Iterator[None]:
    """Whatever a test configures structlog with (as an application would) ends with it: the
    next test logs as it would alone (one test's setup once hid every later log line)."""
    configured, before = structlog.is_configured(), structlog.get_config()
    yield
    if configured:
        structlog.configure(**before)
    else:  # configure() would mark structlog as configured by an application
        structlog.reset_defaults()


@pytest.fixture(scope="session")
def llama_server() -> Iterator[Any]:
    """llama.cpp's HTTP server on the embedded model, started once for the whole session."""
    from tests.support._servers.llama import running_llama_server

    yield from running_llama_server()


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """OpenTelemetry spans, kept in memory for the test to read."""
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    """A tracer provider that sends every finished span to ``exporter``."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.fixture
def fresh_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test starts with no secret known to the scrubbing (restored afterwards).

    Secrets are remembered for the life of the process, so without this a test's secret may
    already be known from an earlier test (or, under mutmut, from the run the mutants are
    forked from) and a broken ``register_secret`` would go unnoticed.
    """
    from sampling_core import redaction

    monkeypatch.setattr(redaction, "_registered", set())
    monkeypatch.setattr(redaction, "_environment", frozenset())
    monkeypatch.setattr(redaction, "_pieces", frozenset())
    monkeypatch.setattr(redaction.KNOWN_SECRETS, "whole", ())


@pytest.fixture(autouse=True)
def _fresh_budget_guard_totals() -> Iterator[None]:
    """The budget guard's process-wide totals start at zero, with nothing unknown, in every
    test (a guard enabled by name shares them; what one test spent is not the next's)."""
    from builtin_plugins.budget_guard import PROCESS_TOTALS

    PROCESS_TOTALS.reset()
    yield
    PROCESS_TOTALS.reset()


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` in this process during the test, as in a program
    started from a terminal, even when the suite runs as a background job (``pytest ... &``
    starts it with SIGINT ignored). Child processes: ``interrupt_helpers.python_command``."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
