"""Every backend call that began ends once, and every wrapper leaves once, over random calls:
concurrency up to 8, random successes, backend errors (some retried), plugin stops and
caller cancellations, under asyncio and trio."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hook_specs import StopSampling, hookimpl
from sampling_core import GenerationRequest, RetryPolicy, Sampler, TransientBackendError
from tests.support.property_helpers import CallScenario, ScenarioBackend, run_call


class Boom(RuntimeError):
    """A backend failure for good."""


@dataclass
class Scenario(CallScenario):
    error_rate: float  # share of backend calls that raise (half of them transient)
    stop_rate: float  # share of returned calls after which a plugin raises StopSampling


scenarios = st.builds(
    Scenario,
    loop_budget=st.integers(1, 4),
    concurrency_budget=st.integers(1, 8),
    seed=st.integers(0, 2**32 - 1),
    pass_rate=st.sampled_from([0.0, 0.2, 1.0]),
    cancel_after_ms=st.one_of(st.none(), st.integers(0, 4)),
    selection=st.sampled_from(["first", "ordered"]),
    error_rate=st.sampled_from([0.0, 0.2, 0.6]),
    stop_rate=st.sampled_from([0.0, 0.1]),
)


Key = tuple[str, int, int]  # sampling_id, iteration, retry: one backend call


@dataclass
class Ledger:
    """What began and what ended: backend calls, and both kinds of wrapper."""

    rng: random.Random
    stop_rate: float
    begun: Counter[Key] = field(default_factory=Counter)
    ended: Counter[Key] = field(default_factory=Counter)
    endings: Counter[str] = field(default_factory=Counter)
    entered: Counter[str] = field(default_factory=Counter)
    left: Counter[str] = field(default_factory=Counter)

    @staticmethod
    def key(payload: Any) -> Key:
        return (payload.sampling_id, payload.iteration, payload.retry)

    def end(self, how: str, payload: Any) -> None:
        self.ended[self.key(payload)] += 1
        self.endings[how] += 1

    @hookimpl
    def generation_pre_call(self, payload: Any) -> None:
        self.begun[self.key(payload)] += 1

    @hookimpl
    def generation_post_call(self, payload: Any) -> None:
        self.end("post_call", payload)
        if self.rng.random() < self.stop_rate:
            raise StopSampling("enough")

    @hookimpl
    def generation_error(self, payload: Any) -> None:
        self.end("error", payload)

    @hookimpl
    def generation_cancelled(self, payload: Any) -> None:
        self.end(f"cancelled: {payload.reason}", payload)

    @hookimpl(wrapper=True)
    def generation_call(self, payload: Any) -> Any:
        self.entered["sync generation_call"] += 1
        try:
            generation = yield
            if self.rng.random() < self.stop_rate:  # a stop raised around the call
                raise StopSampling("enough of these")
            return generation
        finally:
            self.left["sync generation_call"] += 1

    @hookimpl(wrapper=True)
    def sampling_call(self, payload: Any) -> Any:
        self.entered["sync sampling_call"] += 1
        try:
            return (yield)
        finally:
            self.left["sync sampling_call"] += 1


class AsyncWrappers:
    """Async wrappers on both call hooks, counting in the ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    @hookimpl(wrapper=True)
    async def generation_call(self, payload: Any) -> Any:
        self.ledger.entered["async generation_call"] += 1
        try:
            yield
        finally:
            self.ledger.left["async generation_call"] += 1

    @hookimpl(wrapper=True)
    async def sampling_call(self, payload: Any) -> Any:
        self.ledger.entered["async sampling_call"] += 1
        try:
            yield
        finally:
            self.ledger.left["async sampling_call"] += 1


async def run_scenario(s: Scenario) -> None:
    def fault(rng: random.Random, request: GenerationRequest) -> BaseException | None:
        if rng.random() >= s.error_rate:
            return None
        return TransientBackendError("busy") if rng.random() < 0.5 else Boom("down")

    ledger = Ledger(random.Random(s.seed + 1), s.stop_rate)
    sampler = Sampler(
        ScenarioBackend(s, fault, latency_ms=2),
        plugins=[ledger, AsyncWrappers(ledger)],
        load_entrypoints=False,
        retry=RetryPolicy(max_retries=1, base_delay=0.0, jitter=0.0),
    )
    result, _, cancelled = await run_call(sampler, s, (Boom, TransientBackendError))
    # every backend call that began ended exactly once, and nothing ended that did not begin
    assert ledger.ended == ledger.begun, ledger.endings
    # every wrapper that was entered left, once
    assert ledger.left == ledger.entered
    assert ledger.entered["sync sampling_call"] == 1 or cancelled
    # a call hook's wrapper runs for a call that began (not for one refused before it)
    assert ledger.entered["sync generation_call"] <= sum(ledger.begun.values())
    assert result is None or result.stop_reason != "stopped_by_plugin" or ledger.endings


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(scenario=scenarios)
def test_every_begun_call_ends_once_and_every_wrapper_leaves_once(
    loop: str, scenario: Scenario
) -> None:
    anyio.run(run_scenario, scenario, backend=loop)
