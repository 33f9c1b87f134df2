"""The engine's invariants under every kind of fault at once, over random scenarios.

``test_engine_properties.py`` covers backend errors, observe-only plugin faults and outer
cancellation. This adds what it leaves out: faults in the hooks whose payload a plugin may
change (``generation_pre_call``, ``sampling_repair``: the engine fails closed), transient
errors and their retries, ``StopSampling`` from random hooks, and ``BaseException``
subclasses from the backend and from plugins. Whatever happens: ``sampling_loop_end``
fires exactly once (carrying the exception on the error path), iteration ids are unique
and within ``1..L*C``, attempts never exceed ``L*C``, ``stop_reason`` agrees with
``success``, usage equals the sum of the generations the backend returned, and no task is
left running.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from invariants import check_result
from task_helpers import alive_tasks

from hook_specs import Usage, hookimpl
from sampling_core import (
    Generation,
    GenerationRequest,
    PluginError,
    RetryPolicy,
    Sampler,
    StopSampling,
    TransientBackendError,
)


class Boom(RuntimeError):
    """A backend failure."""


class Fatal(BaseException):
    """Not an ``Exception``: nothing may swallow it."""


@dataclass
class Scenario:
    loop_budget: int
    concurrency_budget: int
    seed: int
    pass_rate: float
    backend_faults: float  # share of backend calls that raise (Boom / transient / Fatal)
    mutating_faults: float  # share of pre_call / repair calls that raise
    stop_rate: float  # share of iteration / post_call events that raise StopSampling
    fatal_share: float  # share of faults that are Fatal rather than ordinary
    cancel_after_ms: int | None
    selection: str


scenarios = st.builds(
    Scenario,
    loop_budget=st.integers(1, 8),
    concurrency_budget=st.integers(1, 16),
    seed=st.integers(0, 2**32 - 1),
    pass_rate=st.sampled_from([0.0, 0.1, 0.5]),
    backend_faults=st.sampled_from([0.0, 0.1, 0.4]),
    mutating_faults=st.sampled_from([0.0, 0.02, 0.2]),
    stop_rate=st.sampled_from([0.0, 0.05]),
    fatal_share=st.sampled_from([0.0, 0.1]),
    cancel_after_ms=st.one_of(st.none(), st.integers(0, 5)),
    selection=st.sampled_from(["first", "ordered"]),
)


class ChaosBackend:
    """Random latency, verdicts and faults; counts the usage of what it returned."""

    def __init__(self, s: Scenario) -> None:
        self.s = s
        self.rng = random.Random(s.seed)
        self.returned = Usage()

    async def generate(self, request: GenerationRequest) -> Generation:
        rng, s = self.rng, self.s
        latency, roll, kind = rng.randint(0, 2) / 1000, rng.random(), rng.random()
        verdict = "pass" if rng.random() < s.pass_rate else "fail"
        if latency:
            await anyio.sleep(latency)
        if roll < s.backend_faults:
            if kind < s.fatal_share:
                raise Fatal("backend")
            if kind < 0.5:
                raise TransientBackendError("busy", retry_after=0.0, status=503)
            raise Boom(f"iteration {request.iteration.iteration}")
        usage = Usage(request.iteration.iteration, 1)
        self.returned += usage
        return Generation(verdict, usage=usage)


@dataclass
class Chaos:
    """Raises in random hooks: faults in mutating ones, StopSampling, Fatal."""

    s: Scenario
    rng: random.Random
    ends: list[Any] = field(default_factory=list)

    def _fault(self, rate: float) -> None:
        if self.rng.random() < rate:
            raise Fatal("plugin") if self.rng.random() < self.s.fatal_share else ValueError("x")

    @hookimpl
    def generation_pre_call(self, payload: Any) -> None:
        self._fault(self.s.mutating_faults)

    @hookimpl
    async def sampling_repair(self, payload: Any) -> None:
        await anyio.sleep(0)
        self._fault(self.s.mutating_faults)

    @hookimpl
    def generation_post_call(self, payload: Any) -> None:
        if self.rng.random() < self.s.stop_rate:
            raise StopSampling("enough")

    @hookimpl
    async def sampling_iteration(self, payload: Any) -> None:
        if payload.iteration % 2:
            await anyio.sleep(0)
        if self.rng.random() < self.s.stop_rate:
            raise StopSampling("enough")

    @hookimpl
    def sampling_loop_end(self, payload: Any) -> None:
        self.ends.append(payload)


def passes(text: str) -> bool:
    """says pass"""
    return text == "pass"


async def run_scenario(s: Scenario) -> None:
    backend = ChaosBackend(s)
    chaos = Chaos(s, random.Random(s.seed + 1))
    sampler = Sampler(
        backend,
        plugins=[chaos],
        load_entrypoints=False,
        retry=RetryPolicy(max_retries=1, base_delay=0.0),
    )
    before = alive_tasks()
    result, raised = None, None
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
        except (Boom, TransientBackendError, PluginError, Fatal) as exc:
            raised = exc
    assert alive_tasks() <= before  # no task left running

    assert len(chaos.ends) == 1  # sampling_loop_end exactly once, on every path
    end = chaos.ends[0]
    assert end.usage == backend.returned  # cancelled attempts' spend included
    total = s.loop_budget * s.concurrency_budget
    assert 0 <= end.iterations_used <= total
    if result is None:
        assert end.stop_reason == "error" and not end.success
        if raised is not None:
            assert end.exception is raised
            if isinstance(raised, PluginError):
                assert raised.plugin_name == "Chaos"
                assert raised.hook in ("generation_pre_call", "sampling_repair")
        else:
            assert scope.cancelled_caught
        return
    check_result(result, s.loop_budget, s.concurrency_budget, backend.returned)
    assert (end.stop_reason, end.success) == (result.stop_reason, result.success)
    assert end.exception is None


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios)
def test_invariants_hold_under_every_kind_of_fault(loop: str, scenario: Scenario) -> None:
    anyio.run(run_scenario, scenario, backend=loop)
