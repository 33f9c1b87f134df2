"""Shared fixtures: every async test runs under asyncio and trio."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hook_specs import HookName, hookimpl
from sampling_core import current_iteration


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


class Recorder:
    """Records every hook call: (hook, payload, current_iteration() at that moment)."""

    def __init__(self) -> None:
        self.calls: list[tuple[HookName, Any, Any]] = []

    def _note(self, hook: HookName, payload: Any) -> None:
        self.calls.append((hook, payload, current_iteration()))

    def of(self, hook: HookName) -> list[Any]:
        return [p for h, p, _ in self.calls if h is hook]

    def hooks(self) -> list[HookName]:
        return [h for h, _, _ in self.calls]

    @hookimpl
    def sampling_loop_start(self, payload: Any) -> None:
        self._note(HookName.SAMPLING_LOOP_START, payload)

    @hookimpl
    def sampling_iteration(self, payload: Any) -> None:
        self._note(HookName.SAMPLING_ITERATION, payload)

    @hookimpl
    def sampling_repair(self, payload: Any) -> None:
        self._note(HookName.SAMPLING_REPAIR, payload)

    @hookimpl
    def sampling_loop_end(self, payload: Any) -> None:
        self._note(HookName.SAMPLING_LOOP_END, payload)

    @hookimpl
    def generation_pre_call(self, payload: Any) -> None:
        self._note(HookName.GENERATION_PRE_CALL, payload)

    @hookimpl
    def generation_post_call(self, payload: Any) -> None:
        self._note(HookName.GENERATION_POST_CALL, payload)

    @hookimpl
    def generation_error(self, payload: Any) -> None:
        self._note(HookName.GENERATION_ERROR, payload)


@pytest.fixture
def recorder() -> Recorder:
    """A plugin that records every hook call."""
    return Recorder()


@pytest.fixture(scope="session")
def llama_server() -> Iterator[Any]:
    """llama.cpp's HTTP server on the embedded model, started once for the whole session."""
    from _servers.llama import running_llama_server

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
