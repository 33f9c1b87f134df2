"""The engine's invariants under every kind of fault at once, over random scenarios.

``properties/test_engine.py`` covers backend errors, observe-only plugin faults and outer
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

from hook_specs import Usage, hookimpl
from sampling_core import (
    GenerationRequest,
    PluginError,
    RetryPolicy,
    Sampler,
    StopSampling,
    TransientBackendError,
)
from tests.support.invariants import check_result
from tests.support.property_helpers import CallScenario, ScenarioBackend, call_settings, run_call


class Boom(RuntimeError):
    """A backend failure."""


class Fatal(BaseException):
    """Not an ``Exception``: nothing may swallow it."""


@dataclass
class Scenario(CallScenario):
    backend_faults: float  # share of backend calls that raise (Boom / transient / Fatal)
    mutating_faults: float  # share of pre_call / repair calls that raise
    stop_rate: float  # share of iteration / post_call events that raise StopSampling
    fatal_share: float  # share of faults that are Fatal rather than ordinary


scenarios = st.builds(
    Scenario,
    **call_settings(pass_rates=[0.0, 0.1, 0.5], cancel_within_ms=5),
    backend_faults=st.sampled_from([0.0, 0.1, 0.4]),
    mutating_faults=st.sampled_from([0.0, 0.02, 0.2]),
    stop_rate=st.sampled_from([0.0, 0.05]),
    fatal_share=st.sampled_from([0.0, 0.1]),
)


def chaos_backend(s: Scenario) -> ScenarioBackend:
    """Backend faults of every kind: Fatal, transient (retried), Boom."""

    def fault(rng: random.Random, request: GenerationRequest) -> BaseException | None:
        roll, kind = rng.random(), rng.random()
        if roll >= s.backend_faults:
            return None
        if kind < s.fatal_share:
            return Fatal("backend")
        if kind < 0.5:
            return TransientBackendError("busy", retry_after=0.0, status=503)
        return Boom(f"iteration {request.iteration.iteration}")

    return ScenarioBackend(s, fault)


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


async def run_scenario(s: Scenario) -> None:
    backend = chaos_backend(s)
    chaos = Chaos(s, random.Random(s.seed + 1))
    sampler = Sampler(
        backend,
        plugins=[chaos],
        load_entrypoints=False,
        retry=RetryPolicy(max_retries=1, base_delay=0.0),
    )
    expected = (Boom, TransientBackendError, PluginError, Fatal)
    result, raised, cancelled = await run_call(sampler, s, expected)

    assert len(chaos.ends) == 1  # sampling_loop_end exactly once, on every path
    end = chaos.ends[0]
    # cancelled attempts' spend included: what returned, and what was cut short (unknown:
    # the backend does not stream)
    assert end.usage == backend.returned + end.cancelled_usage
    assert end.cancelled_usage in (Usage(), Usage(None, None, None))
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
            assert cancelled
        return
    check_result(result, s.loop_budget, s.concurrency_budget, backend.returned)
    assert (end.stop_reason, end.success) == (result.stop_reason, result.success)
    assert end.exception is None


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios)
def test_invariants_hold_under_every_kind_of_fault(loop: str, scenario: Scenario) -> None:
    anyio.run(run_scenario, scenario, backend=loop)
