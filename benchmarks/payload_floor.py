"""How cheap can a plugin on every hook be? ``python -m benchmarks.payload_floor``.

Every hook's payload is a pydantic model (the hook contract), and the engine may use only
pydantic's public API. So a plugin that implements every hook costs, per
attempt, at least the payloads it is handed, however the rest of the delivery is written.
This prints that floor, measured in this process:

1. the payloads a trivial plugin on every hook is handed per attempt, counted by a
   ``HookRecorder`` (it implements every hook too; ``loop_budget=4``, zero-latency
   backend, never passing, as in ``benchmarks.instructions``);
2. the time to build those same payloads (the same classes and field values) each public
   way: with ``model_validate``, with ``model_construct``, and with the payload builder the
   engine uses (pydantic's pickle protocol, ``HookPayload.builder``), beside the cost of the
   field dicts alone;
3. a ``sample()`` attempt without plugins, with the trivial plugin, and with a plugin on one
   hook (or the pair ``sampling_loop_start``/``_end``) only: what each hook adds;
4. the ratio a trivial plugin could reach if building its payloads were the only cost the
   plugin added: ``1 + payload time per attempt / no-plugin attempt``;
5. what delivering one hook event costs beyond building its payload (:func:`above_floor`),
   against its target of :data:`ABOVE_FLOOR_TARGET_US` µs;
6. where that goes: the same figure with a bare delivery (:func:`bare_delivery`: the
   payload built and handed to each implementation, nothing else), so that what is left is
   the engine gathering each payload's values into its dict; and the least any delivery
   adds, timed outside the engine: each payload's dict made from its values by a dict
   display, the payload built from it and handed to a function that does nothing.

Every figure is a median of ``--repeats`` runs taken in alternation, so the ratios compare
numbers taken under the same load.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from typing import Any
from unittest import mock

from benchmarks.fakes import FakeModel, TrivialPlugin, configure_logging, engine_runner
from benchmarks.timing import Runner, median, time_batches
from hook_specs import HookPayload, hookimpl
from sampling_core.hooks import table as hook_table
from sampling_core.testing import HookRecorder

LOOP_BUDGET = 4


ENGINE_WAY = "HookPayload.builder (pickle protocol; the engine's way)"
LEAST_WAY = "from their values (a dict display each), each handed to a no-op plugin"
BARE = "trivial plugin on every hook, bare delivery"
BUILD = "build its payloads: "
"""The prefix of the figures of :func:`builders`' ways."""

ONE_HOOK = {
    "sampling_loop_start and _end": ("sampling_loop_start", "sampling_loop_end"),
    "generation_pre_call": ("generation_pre_call",),
    "generation_post_call": ("generation_post_call",),
    "sampling_validate": ("sampling_validate",),
    "sampling_iteration": ("sampling_iteration",),
    "sampling_repair": ("sampling_repair",),
}
"""The hooks the trivial plugin fires, measured one (or one pair) at a time."""


def plugin_on(hooks: tuple[str, ...]) -> object:
    """A plugin implementing ``hooks`` only, each doing nothing."""

    def implementation(name: str) -> Callable[[object, HookPayload], None]:
        def do_nothing(self: object, payload: HookPayload) -> None:
            """Do nothing."""

        do_nothing.__name__ = name
        return hookimpl(do_nothing)

    return type("OnlyThese", (), {name: implementation(name) for name in hooks})()


def payloads_of_one_call() -> list[HookPayload]:
    """The payloads one call hands a plugin on every hook (``HookRecorder`` is one)."""
    recorder = HookRecorder()
    run = engine_runner(
        FakeModel(), loop_budget=LOOP_BUDGET, concurrency_budget=1, plugins=[recorder]
    )
    asyncio.run(run())
    return [event.payload for event in recorder]


def field_values(payload: HookPayload) -> dict[str, Any]:
    """The payload's fields as the engine gave them (read-only views undone)."""
    return {name: payload.__dict__[name] for name in type(payload).model_fields}


def builders(payloads: list[HookPayload]) -> dict[str, Callable[[], object]]:
    """One function per way of building ``payloads`` again; each builds all of them."""
    specs = [(type(p), field_values(p)) for p in payloads]
    made = [(cls.builder(), fields) for cls, fields in specs]

    def dicts_only() -> object:
        return [dict(fields) for _, fields in specs]

    def engine_builder() -> object:
        return [build(dict(fields)) for build, fields in made]

    def construct() -> object:
        return [cls.model_construct(**fields) for cls, fields in specs]

    def validate() -> object:
        return [cls.model_validate(dict(fields)) for cls, fields in specs]

    displays = [
        (build, dict_display(tuple(fields)), tuple(fields.values())) for build, fields in made
    ]

    def least_delivery() -> object:
        handed = []
        for build, display, values in displays:
            payload = build(display(*values))
            _do_nothing(payload)
            handed.append(payload)
        return handed

    return {
        "the field dicts alone": dicts_only,
        ENGINE_WAY: engine_builder,
        "model_construct": construct,
        "model_validate": validate,
        LEAST_WAY: least_delivery,
    }


def _do_nothing(payload: HookPayload) -> None:
    """A plugin's implementation that does nothing."""


def dict_display(names: tuple[str, ...]) -> Callable[..., dict[str, Any]]:
    """A function taking one value per name, in order, and returning them as a dict made by
    a dict display (``{"a": a, "b": b}``): how a delivery gathers a payload's values, where
    the floor copies a dict made beforehand."""
    params = [f"v{i}" for i in range(len(names))]
    items = ", ".join(f"{name!r}: {param}" for name, param in zip(names, params, strict=True))
    namespace: dict[str, Any] = {}
    exec(f"def display({', '.join(params)}):\n    return {{{items}}}", namespace)
    return namespace["display"]


def bare_delivery(
    hook: Any, build: Callable[[dict[str, Any]], Any], inline: tuple[Any, ...], writable: bool
) -> Callable[[Any, dict[str, Any]], Any]:
    """A direct route's delivery that builds the payload and calls each implementation, and
    nothing else: no fault policy, no crediting of writes, no check for an unawaited
    coroutine (what :func:`sampling_core.hooks.table.delivery` adds). Measurement
    only: a plugin raising would escape, an async one is not awaited."""
    functions = tuple(impl.function for impl in inline)

    def deliver(channel: Any, fields: dict[str, Any] | None, payload: Any = None) -> Any:
        if payload is None:
            payload = build(fields)  # type: ignore[arg-type]
        for function in functions:
            function(payload)
        return payload

    return deliver


def bare_engine(plugins: list[Any]) -> Runner:
    """:func:`~benchmarks.fakes.engine_runner` whose sampler delivers with
    :func:`bare_delivery`: its hook table is made by a first call while that delivery is in
    place (the sampler keeps it while no plugin is registered)."""
    run = engine_runner(FakeModel(), loop_budget=LOOP_BUDGET, concurrency_budget=1, plugins=plugins)
    with mock.patch.object(hook_table, "delivery", bare_delivery):
        asyncio.run(run())
    return run


def measure(calls: int, repeats: int) -> dict[str, Any]:
    """Every figure the module docstring lists, in µs per attempt (medians of ``repeats``,
    timed in alternation by :func:`benchmarks.timing.time_batches`)."""
    payloads = payloads_of_one_call()

    def engine(plugins: list[Any]) -> Runner:
        return engine_runner(
            FakeModel(), loop_budget=LOOP_BUDGET, concurrency_budget=1, plugins=plugins
        )

    def awaitable(build: Callable[[], object]) -> Runner:
        async def one_call() -> object:  # the payloads of one call, built again
            return build()

        return one_call

    runners: dict[str, Runner] = {
        "no plugin": engine([]),
        "trivial plugin on every hook": engine([TrivialPlugin()]),
        BARE: bare_engine([TrivialPlugin()]),
        **{f"plugin on {name} only": engine([plugin_on(h)]) for name, h in ONE_HOOK.items()},
        **{f"{BUILD}{name}": awaitable(way) for name, way in builders(payloads).items()},
    }
    taken = asyncio.run(time_batches(runners, calls=calls, repeats=repeats, warmup=50))
    attempts = calls * LOOP_BUDGET
    return {
        "payloads per attempt": len(payloads) / LOOP_BUDGET,
        "us per attempt": {name: median(values) / attempts * 1e6 for name, values in taken.items()},
    }


def main(argv: list[str] | None = None) -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.payload_floor")
    parser.add_argument("--calls", type=int, default=5000, help="sample() calls per run")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    configure_logging()  # as the other benchmarks do (the process is the application)
    found = measure(args.calls, args.repeats)
    us = found["us per attempt"]
    base, plugin = us["no plugin"], us["trivial plugin on every hook"]
    print(f"payloads per attempt with a plugin on every hook: {found['payloads per attempt']:g}")
    print()
    rows = [("sample() attempt, no plugin", base, "-")]
    rows.append(("sample() attempt, trivial plugin on every hook", plugin, "-"))
    rows.append((f"sample() attempt, {BARE}", us[BARE], "no fault policy, no write crediting"))
    rows += [
        (f"sample() attempt, {name}", value, f"the hook adds {value - base:.2f} µs per attempt")
        for name, value in us.items()
        if name.startswith("plugin on ")
    ]
    rows += [
        (name, value, f"the trivial-plugin ratio cannot go below {1 + value / base:.2f}")
        for name, value in us.items()
        if name.startswith(BUILD)
    ]
    print("| per attempt | µs | ÷ no-plugin attempt | what it means |")
    print("|---|---|---|---|")
    for name, value, floor in rows:
        print(f"| {name} | {value:.2f} | {value / base:.2f} | {floor} |")
    print()
    above = above_floor(us, found["payloads per attempt"])
    verdict = "met" if above <= ABOVE_FLOOR_TARGET_US else "missed"
    print(
        f"delivery above the payload floor: {above:.2f} µs per hook event "
        f"(target <= {ABOVE_FLOOR_TARGET_US}: {verdict})"
    )
    events = found["payloads per attempt"]
    bare = above_floor({**us, "trivial plugin on every hook": us[BARE]}, events)
    print(
        f"  with a bare delivery (payload built, implementation called, nothing else): "
        f"{bare:.2f} µs; the rest is the engine gathering each payload's values"
    )
    least = (us[f"{BUILD}{LEAST_WAY}"] - us[f"{BUILD}{ENGINE_WAY}"]) / events
    print(
        f"  the least any delivery adds, outside the engine (a dict display of the values, "
        f"one call): {least:.2f} µs"
    )


ABOVE_FLOOR_TARGET_US = 0.5
"""What a trivial plugin on every hook may cost per hook event beyond building its payload."""


def above_floor(us: dict[str, float], events_per_attempt: float) -> float:
    """What delivering one hook event costs beyond building its payload, in µs: the trivial
    plugin's cost per attempt, less the no-plugin attempt and the engine's way of building
    that attempt's payloads, over the events per attempt."""
    floor = us[f"{BUILD}{ENGINE_WAY}"]
    extra = us["trivial plugin on every hook"] - us["no plugin"] - floor
    return extra / events_per_attempt


if __name__ == "__main__":
    main()
