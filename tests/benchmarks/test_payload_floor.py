"""The payload-floor benchmark counts the payloads a plugin on every hook is handed, and
rebuilds exactly those payloads each way it times."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from benchmarks.fakes import FakeModel, TrivialPlugin, engine_runner
from benchmarks.payload_floor import (
    BARE,
    BUILD,
    ENGINE_WAY,
    LEAST_WAY,
    LOOP_BUDGET,
    ONE_HOOK,
    above_floor,
    bare_engine,
    builders,
    dict_display,
    field_values,
    measure,
    payloads_of_one_call,
    plugin_on,
)
from hook_specs import hookimpl


def test_it_keeps_every_payload_of_a_call() -> None:
    payloads = payloads_of_one_call()
    kinds = Counter(type(p).hook.value for p in payloads)
    # loop_budget=4, never passing: four attempts (each around its backend call), three
    # repairs, one start, the call's work and one end
    assert kinds == {
        "sampling_loop_start": 1,
        "sampling_call": 1,
        "generation_call": LOOP_BUDGET,
        "generation_pre_call": LOOP_BUDGET,
        "generation_post_call": LOOP_BUDGET,
        "sampling_validate": LOOP_BUDGET,
        "sampling_iteration": LOOP_BUDGET,
        "sampling_repair": LOOP_BUDGET - 1,
        "sampling_loop_end": 1,
    }


def test_every_way_builds_the_same_payloads() -> None:
    payloads = payloads_of_one_call()
    expected = [field_values(p) for p in payloads]
    ways = builders(payloads)
    assert len(ways) == 5
    assert LEAST_WAY in ways
    for name, build in ways.items():
        made = build()
        if name == "the field dicts alone":
            assert made == expected
            continue
        assert [type(p) for p in made] == [type(p) for p in payloads], name
        assert [field_values(p) for p in made] == expected, name


def test_measure_reports_the_payloads_per_attempt_and_every_figure() -> None:
    found = measure(calls=20, repeats=1)
    assert found["payloads per attempt"] == 26 / LOOP_BUDGET
    assert set(found["us per attempt"]) == {
        "no plugin",
        "trivial plugin on every hook",
        BARE,
        *(f"plugin on {name} only" for name in ONE_HOOK),
        *(f"{BUILD}{name}" for name in builders(payloads_of_one_call())),
    }
    assert all(value > 0 for value in found["us per attempt"].values())


def test_a_plugin_on_one_hook_implements_that_hook_only() -> None:
    from hook_specs import HookName

    every = {hook.value for hook in HookName}
    for hooks in ONE_HOOK.values():
        plugin = plugin_on(hooks)
        assert {name for name in every if callable(getattr(plugin, name, None))} == set(hooks)


def test_above_floor_is_the_plugins_cost_less_the_attempt_and_its_payloads_per_event() -> None:
    us = {
        "no plugin": 7.0,
        "trivial plugin on every hook": 20.0,
        f"{BUILD}{ENGINE_WAY}": 6.0,
    }
    assert above_floor(us, events_per_attempt=5.0) == (20.0 - 7.0 - 6.0) / 5.0


def test_a_dict_display_gathers_the_values_under_their_names_in_order() -> None:
    display = dict_display(("sampling_id", "attempt", "text"))
    made = display("abc", 2, "it's {odd}")
    assert made == {"sampling_id": "abc", "attempt": 2, "text": "it's {odd}"}
    assert list(made) == ["sampling_id", "attempt", "text"]


def noting(seen: list[str], fail: list[bool]) -> object:
    """A plugin on every hook the trivial plugin implements, noting each payload's hook;
    its ``sampling_iteration`` raises while ``fail`` holds ``True``."""

    def implementation(name: str) -> Any:
        def note(self: object, payload: Any) -> None:
            seen.append(type(payload).hook.value)
            if name == "sampling_iteration" and fail[0]:
                raise RuntimeError("an observer failing")

        note.__name__ = name
        return hookimpl(note)

    names = [n for n in vars(TrivialPlugin) if n.startswith(("sampling_", "generation_"))]
    return type("Notes", (), {name: implementation(name) for name in names})()


def test_the_bare_engine_hands_the_same_payloads_through_the_bare_delivery() -> None:
    seen: list[str] = []
    fail = [False]
    run = bare_engine([noting(seen, fail)])
    seen.clear()
    result = asyncio.run(run())
    assert not result.success and result.iterations_used == LOOP_BUDGET
    assert seen == [type(p).hook.value for p in payloads_of_one_call()]
    # The bare delivery has no fault policy: an observer's exception is not isolated there.
    fail[0] = True
    with pytest.raises(RuntimeError, match="an observer failing"):
        asyncio.run(run())
    isolated = engine_runner(
        FakeModel(), loop_budget=LOOP_BUDGET, concurrency_budget=1, plugins=[noting([], fail)]
    )
    faults = asyncio.run(isolated()).plugin_errors  # kept, or counted on the last kept
    assert sum(1 + fault.more for fault in faults) == LOOP_BUDGET
