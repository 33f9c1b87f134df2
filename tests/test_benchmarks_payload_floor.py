"""The payload-floor benchmark counts the payloads a plugin on every hook is handed, and
rebuilds exactly those payloads each way it times."""

from __future__ import annotations

from collections import Counter

from benchmarks.payload_floor import (
    BUILD,
    ENGINE_WAY,
    LOOP_BUDGET,
    ONE_HOOK,
    above_floor,
    builders,
    field_values,
    measure,
    payloads_of_one_call,
    plugin_on,
)


def test_it_keeps_every_payload_of_a_call() -> None:
    payloads = payloads_of_one_call()
    kinds = Counter(type(p).hook.value for p in payloads)
    # loop_budget=4, never passing: four attempts, three repairs, one start and one end
    assert kinds == {
        "sampling_loop_start": 1,
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
    assert len(ways) == 4
    for name, build in ways.items():
        made = build()
        if name == "the field dicts alone":
            assert made == expected
            continue
        assert [type(p) for p in made] == [type(p) for p in payloads], name
        assert [field_values(p) for p in made] == expected, name


def test_measure_reports_the_payloads_per_attempt_and_every_figure() -> None:
    found = measure(calls=20, repeats=1)
    assert found["payloads per attempt"] == 21 / LOOP_BUDGET
    assert set(found["us per attempt"]) == {
        "no plugin",
        "trivial plugin on every hook",
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
