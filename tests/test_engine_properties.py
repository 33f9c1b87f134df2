"""Property tests of the engine's invariants over random budgets, timings and faults."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from invariants import check_result
from task_helpers import alive_tasks

from hook_specs import HookName, Usage, hookimpl
from sampling_core import Generation, GenerationRequest, Sampler, SamplingResult
from sampling_core import loop as loop_module
from sampling_core.subsample_tasks import AnyioSubsampleTasks

H = HookName


class Boom(RuntimeError):
    """A backend failure injected by the scenario."""


@dataclass
class Scenario:
    loop_budget: int
    concurrency_budget: int
    seed: int
    pass_rate: float
    error_rate: float
    plugin_fault_rate: float
    latency_ms: int
    cancel_after_ms: int | None
    selection: str


scenarios = st.builds(
    Scenario,
    loop_budget=st.integers(1, 8),
    concurrency_budget=st.integers(1, 16),
    seed=st.integers(0, 2**32 - 1),
    pass_rate=st.sampled_from([0.0, 0.05, 0.3, 1.0]),
    error_rate=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
    plugin_fault_rate=st.sampled_from([0.0, 0.2]),
    latency_ms=st.sampled_from([0, 1, 2]),
    cancel_after_ms=st.one_of(st.none(), st.integers(0, 6)),
    selection=st.sampled_from(["first", "ordered"]),
)


class ScenarioBackend:
    """Random latency, verdicts and failures, all from the scenario's seed."""

    def __init__(self, scenario: Scenario) -> None:
        self.s = scenario
        self.rng = random.Random(scenario.seed)
        self.returned = Usage()

    async def generate(self, request: GenerationRequest) -> Generation:
        latency = self.rng.randint(0, self.s.latency_ms) / 1000
        fail = self.rng.random() < self.s.error_rate
        verdict = "pass" if self.rng.random() < self.s.pass_rate else "fail"
        if latency:
            await anyio.sleep(latency)
        if fail:
            raise Boom(f"iteration {request.iteration.iteration}")
        usage = Usage(1 + request.iteration.iteration, 1)
        self.returned += usage
        return Generation(verdict, usage=usage)


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
    assert len(result.plugin_errors) == observer.faults_raised
    assert (end.iterations_used, end.cancelled) == (result.iterations_used, result.cancelled)


async def run_scenario(s: Scenario) -> None:
    backend = ScenarioBackend(s)
    observer = Observer(random.Random(s.seed + 1), s.plugin_fault_rate)
    sampler = Sampler(backend, plugins=[observer], load_entrypoints=False)
    result, raised = None, None
    before = alive_tasks()

    def passes(text: str) -> bool:
        """passes"""
        return text == "pass"

    with anyio.CancelScope() as scope:
        if s.cancel_after_ms is not None:
            scope.deadline = anyio.current_time() + s.cancel_after_ms / 1000
        try:
            result = await sampler.sample(
                "q",
                requirements=[passes],
                loop_budget=s.loop_budget,
                concurrency_budget=s.concurrency_budget,
                selection=s.selection,
            )
        except Boom as exc:
            raised = exc
    if scope.cancelled_caught:
        raised = "cancelled"
    check_invariants(s, result, raised, observer, backend)
    assert alive_tasks() <= before  # no task left running


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
