"""What the engine's property tests share: the settings every random scenario draws, a backend
driven by the scenario's seed, and one ``sample()`` call run under the scenario's deadline."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
from hypothesis import strategies as st

from hook_specs import Usage
from sampling_core import Generation, GenerationRequest, Sampler, SamplingResult
from tests.support.task_helpers import alive_tasks


@dataclass
class CallScenario:
    """One ``sample()`` call's settings; a property test's scenario adds its faults."""

    loop_budget: int
    concurrency_budget: int
    seed: int
    pass_rate: float
    cancel_after_ms: int | None  # cancel the caller's scope after this long (None: never)
    selection: str


def call_settings(*, pass_rates: list[float], cancel_within_ms: int) -> dict[str, Any]:
    """Strategies of :class:`CallScenario`'s fields, for ``st.builds(Scenario, **...)``."""
    return {
        "loop_budget": st.integers(1, 8),
        "concurrency_budget": st.integers(1, 16),
        "seed": st.integers(0, 2**32 - 1),
        "pass_rate": st.sampled_from(pass_rates),
        "cancel_after_ms": st.one_of(st.none(), st.integers(0, cancel_within_ms)),
        "selection": st.sampled_from(["first", "ordered"]),
    }


Fault = Callable[[random.Random, GenerationRequest], BaseException | None]


class ScenarioBackend:
    """Random latency (0 to ``latency_ms``), verdicts and faults, all from the scenario's seed.

    A reply is ``"pass"`` at the scenario's pass rate, else ``"fail"``; ``fault`` draws the
    exception a call raises, or ``None``. ``returned`` sums the usage of every generation it
    returned, so the totals can be checked against it.
    """

    def __init__(self, s: CallScenario, fault: Fault, *, latency_ms: int = 2) -> None:
        self.s, self.fault, self.latency_ms = s, fault, latency_ms
        self.rng = random.Random(s.seed)
        self.returned = Usage()

    async def generate(self, request: GenerationRequest) -> Generation:
        latency = self.rng.randint(0, self.latency_ms) / 1000
        error = self.fault(self.rng, request)
        verdict = "pass" if self.rng.random() < self.s.pass_rate else "fail"
        if latency:
            await anyio.sleep(latency)
        if error is not None:
            raise error
        usage = Usage(request.iteration.iteration, 1)
        self.returned += usage
        return Generation(verdict, usage=usage)


def passes(text: str) -> bool:
    """says pass"""
    return text == "pass"


async def run_call(
    sampler: Sampler, s: CallScenario, expected: tuple[type[BaseException], ...]
) -> tuple[SamplingResult | None, BaseException | None, bool]:
    """Run the scenario's call: ``(result, the expected exception it raised, cancelled)``.

    The call's scope is cancelled at the scenario's deadline, if it has one; whatever
    happened, no task it started is left running.
    """
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
        except expected as exc:
            raised = exc
    assert alive_tasks() <= before  # no task left running
    return result, raised, scope.cancelled_caught
