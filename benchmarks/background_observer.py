"""The background-observer scenario: what a slow ``@background`` observer adds to a call.

One ``sample()`` call of 16 attempts (``loop_budget=4, concurrency_budget=4``, 5 ms backend,
never passing) with no plugin, and with a plugin whose ``@background`` async
``sampling_iteration`` sleeps 50 ms per event (0.8 s of observer time per call). The call
must not wait for the observer: the target allows it under 5% more wall time. The bare
loop and Mellea make the same 16 attempts, for reference. The
events are delivered by the sampler's worker meanwhile; they are drained (``aclose``) after
the timed batches, outside the timing.
"""

from __future__ import annotations

import asyncio
from typing import Any

from benchmarks.fakes import PASSES, PROMPT, EngineBackend, FakeModel
from benchmarks.report import Check, Row
from benchmarks.runners import implementations
from benchmarks.timing import Runner, median, paired_ratio, time_batches
from hook_specs import background, hookimpl
from sampling_core import Sampler

OBSERVER_SLEEP_S = 0.05


class SlowObserver:
    """A ``@background`` observer that sleeps 50 ms per ``sampling_iteration`` event."""

    def __init__(self) -> None:
        self.events = 0

    @hookimpl
    @background
    async def sampling_iteration(self, payload: Any) -> None:
        """Sleep, as a slow exporter would, then count the event."""
        await asyncio.sleep(OBSERVER_SLEEP_S)
        self.events += 1


def sixteen_attempts(model: FakeModel, samplers: dict[str, Sampler]) -> dict[str, Runner]:
    """A call of 16 attempts (``loop_budget=4, concurrency_budget=4``, never passing) on each
    sampler, then the bare loop and Mellea (when installed) making the same 16 attempts on
    ``model``, for reference."""

    def runner(sampler: Sampler) -> Runner:
        async def run() -> Any:
            return await sampler.sample(
                PROMPT, requirements=[PASSES], loop_budget=4, concurrency_budget=4
            )

        return run

    runners = {name: runner(sampler) for name, sampler in samplers.items()}
    others = implementations(model, loop_budget=4, concurrency_budget=4)
    runners["bare"] = others["bare"]
    if "mellea" in others:
        runners["mellea"] = others["mellea"]
    return runners


async def background_observer(s: Any) -> list[Row]:
    """The call's wall time with and without the slow background observer."""
    model = FakeModel(latency=0.005)
    observer = SlowObserver()
    samplers = {
        "no plugin": Sampler(EngineBackend(model), load_entrypoints=False),
        "background observer": Sampler(
            EngineBackend(model), plugins=[observer], load_entrypoints=False
        ),
    }

    runners = sixteen_attempts(model, samplers)
    calls = 1 if s.quick else 5
    seconds = await time_batches(runners, calls=calls, repeats=s.repeats, warmup=1)
    for sampler in samplers.values():
        await sampler.aclose()  # every queued event delivered (not timed)
    ms = {name: median(v) / calls * 1e3 for name, v in seconds.items()}
    paired = paired_ratio(seconds, "background observer", "no plugin")
    setting = "16 attempts (loop_budget=4, concurrency_budget=4), 5 ms backend"
    return [
        Row(
            "background observer",
            f"{setting}, @background observer sleeping 50 ms per event",
            "ms per call",
            {
                "engine": ms["background observer"],
                "bare": ms.get("bare"),
                "mellea": ms.get("mellea"),
            },
            [Check("÷ no plugin", paired, "<", 1.05)],
            {
                "no_plugin_ms": ms["no plugin"],
                "ratio_of_medians": ms["background observer"] / ms["no plugin"],
                "median_of_paired_ratios": paired,
                "events_delivered": observer.events,
            },
        )
    ]
