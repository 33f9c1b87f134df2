"""Property tests of the engine's invariants over random budgets, timings and faults."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hook_specs import hookimpl
from sampling_core import GenerationRequest, Sampler, SamplingResult
from sampling_core.engine import loop as loop_module
from sampling_core.engine.subsample_tasks import AnyioSubsampleTasks
from tests.support.invariants import check_result
from tests.support.property_helpers import CallScenario, ScenarioBackend, call_settings, run_call


class Boom(RuntimeError):
    """A backend failure injected by the scenario."""


@dataclass
class Scenario(CallScenario):
    error_rate: float  # share of backend calls that raise Boom
    plugin_fault_rate: float  # share of observe-only hook calls that raise
    latency_ms: int


scenarios = st.builds(
    Scenario,
    **call_settings(pass_rates=[0.0, 0.05, 0.3, 1.0], cancel_within_ms=6),
    error_rate=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
    plugin_fault_rate=st.sampled_from([0.0, 0.2]),
    latency_ms=st.sampled_from([0, 1, 2]),
)


def backend_of(s: Scenario) -> ScenarioBackend:
    def fault(rng: random.Random, request: GenerationRequest) -> Boom | None:
        return (
            Boom(f"iteration {request.iteration.iteration}")
            if rng.random() < s.error_rate
            else None
        )

    return ScenarioBackend(s, fault, latency_ms=s.latency_ms)


@dataclass
class Observer:
    """Counts events; raises in observe-only hooks at the scenario's fault rate."""

    rng: random.Random
    fault_rate: float
    ends: list = field(default_factory=list)
    iterations: list = field(default_factory=list)
    faults_raised: int = 0

    def _maybe_fail(self) -> None:
        if self.rng.random() < self.fault_rate:
            self.faults_raised += 1
            raise ValueError("injected plugin fault")

    @hookimpl
    async def sampling_iteration(self, payload) -> None:
        self.iterations.append(payload)
        if payload.iteration % 2:
            await anyio.sleep(0)
        self._maybe_fail()

    @hookimpl
    def generation_post_call(self, payload) -> None:
        self._maybe_fail()

    @hookimpl
    def sampling_loop_end(self, payload) -> None:
        self.ends.append(payload)


def check_invariants(s: Scenario, result: SamplingResult | None, raised, observer, backend):
    assert len(observer.ends) == 1  # sampling_loop_end exactly once, on every path
    end = observer.ends[0]
    if result is None:
        assert end.stop_reason == "error" and end.exception is not None
        assert isinstance(raised, Boom) or raised == "cancelled"
        return
    assert raised is None
    check_result(result, s.loop_budget, s.concurrency_budget, backend.returned)
    # every completed attempt reached every plugin
    assert sorted(p.iteration for p in observer.iterations) == sorted(
        a.iteration for a in result.attempts
    )
    # each fault is kept, or counted on the last kept of its plugin and hook
    assert sum(1 + f.more for f in result.plugin_errors) == observer.faults_raised
    assert (end.iterations_used, end.cancelled) == (result.iterations_used, result.cancelled)


async def run_scenario(s: Scenario) -> None:
    backend = backend_of(s)
    observer = Observer(random.Random(s.seed + 1), s.plugin_fault_rate)
    sampler = Sampler(backend, plugins=[observer], load_entrypoints=False)
    result, raised, cancelled = await run_call(sampler, s, (Boom,))
    check_invariants(s, result, "cancelled" if cancelled else raised, observer, backend)


@pytest.mark.parametrize("loop", ["asyncio", "asyncio-taskgroup", "trio"])
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(scenario=scenarios)
def test_engine_invariants_hold_for_random_scenarios(loop, scenario, monkeypatch):
    if loop == "asyncio-taskgroup":
        # On asyncio the engine runs subsamples as plain tasks by anyio's rules; check the
        # same invariants with the anyio task group it uses everywhere else.
        monkeypatch.setattr(loop_module, "subsample_tasks", AnyioSubsampleTasks)
        loop = "asyncio"
    anyio.run(run_scenario, scenario, backend=loop)
