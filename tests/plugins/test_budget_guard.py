"""budget_guard: caps on budgets, and generation/token ceilings per call and per process."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from builtin_plugins.budget_guard import ENV_VAR, BudgetGuard, Totals
from hook_specs import hookimpl


@pytest.fixture
def strict_plugins() -> bool:
    """The built-in under test runs strict: if it raises in any hook, its tests fail."""
    return True


def never(text: str) -> bool:
    """never passes"""
    return False


class Greedy:
    """A plugin that asks for big budgets."""

    @hookimpl
    def sampling_loop_start(self, payload: Any) -> None:
        payload.loop_budget = 50
        payload.concurrency_budget = 9


def test_caps_the_budgets_other_plugins_wrote_running_last(sampler, scripted_backend):
    guard = BudgetGuard(max_loop_budget=3, max_concurrency_budget=2, totals=Totals())
    backend = scripted_backend(["x"])
    # Registered after Greedy, a plain implementation would run before it: trylast matters.
    result = sampler(backend, plugins=[Greedy(), guard]).sample_sync("q", requirements=[never])
    assert (result.loop_budget, result.concurrency_budget) == (3, 2)
    assert backend.calls == result.iterations_used == 6


def test_generation_ceiling_per_call(sampler, scripted_backend, hook_recorder):
    backend = scripted_backend(["x"])
    guard = BudgetGuard(max_generations_per_call=3, totals=Totals())
    result = sampler(backend, plugins=[guard]).sample_sync("q", requirements=[never], loop_budget=5)
    assert backend.calls == 3
    assert result.stop_reason == "stopped_by_plugin" and result.iterations_used == 3
    # The next call starts from zero.
    second = sampler(backend, plugins=[guard]).sample_sync("q", requirements=[never], loop_budget=2)
    assert second.stop_reason == "budget_exhausted" and backend.calls == 5


def test_token_ceiling_per_call_stops_where_it_is_crossed(sampler, scripted_backend):
    backend = scripted_backend(["a b c"])  # "one two" + "a b c": 5 tokens a call
    guard = BudgetGuard(max_tokens_per_call=12, totals=Totals())
    result = sampler(backend, plugins=[guard]).sample_sync(
        "one two", requirements=[never], loop_budget=5
    )
    assert result.stop_reason == "stopped_by_plugin"
    assert backend.calls == 3  # 15 tokens: over 12 after the third call
    assert result.usage.total_tokens == 15  # the crossing call's spend is still counted
    assert result.iterations_used == 2


def test_a_call_at_its_token_ceiling_makes_no_further_call(sampler, scripted_backend):
    backend = scripted_backend(["a b c"])
    guard = BudgetGuard(max_tokens_per_call=10, totals=Totals())
    result = sampler(backend, plugins=[guard]).sample_sync(
        "one two", requirements=[never], loop_budget=5
    )
    assert backend.calls == 2 and result.iterations_used == 2
    assert result.stop_reason == "stopped_by_plugin"


def test_process_ceilings_span_calls(sampler, scripted_backend):
    totals = Totals()
    backend = scripted_backend(["x"])
    s = sampler(backend, plugins=[BudgetGuard(max_generations_total=3, totals=totals)])
    first = s.sample_sync("q", requirements=[never], loop_budget=2)
    second = s.sample_sync("q", requirements=[never], loop_budget=2)
    third = s.sample_sync("q", requirements=[never], loop_budget=2)
    assert first.stop_reason == "budget_exhausted"
    assert second.stop_reason == "stopped_by_plugin" and second.iterations_used == 1
    assert third.stop_reason == "stopped_by_plugin" and third.iterations_used == 0
    assert backend.calls == 3 and totals.started == totals.generations == 3

    totals.reset()
    assert s.sample_sync("q").stop_reason == "success"


def test_process_token_ceiling(sampler, scripted_backend):
    totals = Totals()
    backend = scripted_backend(["a b c"])
    s = sampler(backend, plugins=[BudgetGuard(max_tokens_total=12, totals=totals)])
    assert s.sample_sync("one two", requirements=[never], loop_budget=2).iterations_used == 2
    second = s.sample_sync("one two", requirements=[never], loop_budget=2)
    assert second.stop_reason == "stopped_by_plugin" and totals.tokens == 15
    third = s.sample_sync("one two", requirements=[never], loop_budget=2)
    assert third.iterations_used == 0 and backend.calls == 3


@pytest.mark.anyio
async def test_a_shared_ceiling_holds_across_concurrent_calls(sampler, scripted_backend):
    totals = Totals()
    backend = scripted_backend(["x"], latency=0.001)
    s = sampler(backend, plugins=[BudgetGuard(max_generations_total=10, totals=totals)])
    results: list[Any] = []

    async def one() -> None:
        results.append(
            await s.sample("q", requirements=[never], loop_budget=3, concurrency_budget=2)
        )

    async with anyio.create_task_group() as group:
        for _ in range(4):
            group.start_soon(one)
    assert totals.started == 10 and backend.calls <= 10
    # Siblings in flight when a call was stopped were cancelled: not every call completed.
    assert sum(r.iterations_used for r in results) <= 10
    assert any(r.stop_reason == "stopped_by_plugin" for r in results)


def test_failed_backend_calls_count_as_generations(sampler, scripted_backend):
    totals = Totals()
    backend = scripted_backend(["x"], failures={1: RuntimeError("down")})
    s = sampler(backend, plugins=[BudgetGuard(max_generations_total=2, totals=totals)])
    with pytest.raises(RuntimeError):
        s.sample_sync("q")
    assert totals.generations == 1 and totals.tokens == 0


def test_settings_from_the_environment_and_by_name(sampler, scripted_backend, monkeypatch):
    monkeypatch.setenv(ENV_VAR, "max_loop_budget=2, max_generations_per_call=7")
    guard = BudgetGuard()
    assert (guard.max_loop_budget, guard.max_generations_per_call) == (2, 7)
    assert BudgetGuard(max_loop_budget=4).max_loop_budget == 4  # an argument wins

    s = sampler(scripted_backend(["x"]), plugins=["budget_guard"])
    result = s.sample_sync("q", requirements=[never], loop_budget=5)
    assert result.loop_budget == 2 and result.iterations_used == 2

    for bad, message in [
        ("max_tokenz=5", "names among"),
        ("max_loop_budget=lots", "must be an integer"),
        ("max_loop_budget=0", ">= 1"),
    ]:
        with pytest.raises(ValueError, match=message):
            BudgetGuard(environ={ENV_VAR: bad})
    with pytest.raises(TypeError, match="must be an int"):
        BudgetGuard(max_tokens_total=True)


def priced_reply(cost: float | None):
    """A scripted reply whose call costs ``cost`` dollars (``None``: price unknown)."""
    from hook_specs.records import Generation, Usage

    return lambda request: Generation("x", usage=Usage(2, 3, cost), model="priced-model")


def test_dollar_ceiling_per_call_stops_where_it_is_crossed(sampler, scripted_backend):
    backend = scripted_backend(priced_reply(0.04))
    guard = BudgetGuard(max_usd_per_call=0.10, totals=Totals())
    result = sampler(backend, plugins=[guard]).sample_sync("q", requirements=[never], loop_budget=9)
    assert result.stop_reason == "stopped_by_plugin"
    assert backend.calls == 3  # $0.12 after the third call: over $0.10
    assert result.usage.cost_usd == pytest.approx(0.12)


def test_dollar_ceiling_per_process_spans_calls(sampler, scripted_backend):
    totals = Totals()
    backend = scripted_backend(priced_reply(0.25))
    s = sampler(backend, plugins=[BudgetGuard(max_usd_total=0.5, totals=totals)])
    first = s.sample_sync("q", requirements=[never], loop_budget=2)
    assert first.stop_reason == "budget_exhausted" and totals.cost_usd == pytest.approx(0.5)
    second = s.sample_sync("q", requirements=[never], loop_budget=2)
    assert second.stop_reason == "stopped_by_plugin" and backend.calls == 2  # none made


def test_a_dollar_ceiling_with_an_unknown_price_fails_closed(sampler, scripted_backend):
    backend = scripted_backend(priced_reply(None))
    s = sampler(backend, plugins=[BudgetGuard(max_usd_total=1.0, totals=Totals())])
    result = s.sample_sync("q", requirements=[never], loop_budget=5)
    assert result.stop_reason == "stopped_by_plugin" and backend.calls == 1
    unpriced = sampler(backend, plugins=[BudgetGuard(max_tokens_total=99, totals=Totals())])
    assert unpriced.sample_sync("q", requirements=[never], loop_budget=2).iterations_used == 2


def test_dollar_settings_from_the_environment_and_checked() -> None:
    guard = BudgetGuard(environ={ENV_VAR: "max_usd_total=0.5,max_usd_per_call=0.01"})
    assert (guard.max_usd_total, guard.max_usd_per_call) == (0.5, 0.01)
    with pytest.raises(ValueError, match="must be a number"):
        BudgetGuard(environ={ENV_VAR: "max_usd_total=cheap"})
    with pytest.raises(ValueError, match="> 0"):
        BudgetGuard(max_usd_per_call=0)
    with pytest.raises(TypeError, match="number of dollars"):
        BudgetGuard(max_usd_total="1")  # type: ignore[arg-type]


def test_max_tokens_is_the_per_call_token_ceiling_from_python_yaml_and_env(
    sampler, scripted_backend, monkeypatch
):
    """The documented example ``("budget_guard", {"max_tokens": 5000})``: a per-call
    ceiling."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    backend = scripted_backend(["a b c"])  # "one two" + "a b c": 5 tokens a call
    by_tuple = sampler(backend, plugins=[("budget_guard", {"max_tokens": 12})])
    first = by_tuple.sample_sync("one two", requirements=[never], loop_budget=5)
    assert first.stop_reason == "stopped_by_plugin" and backend.calls == 3
    # per call: the next call starts from zero again
    second = by_tuple.sample_sync("one two", requirements=[never], loop_budget=2)
    assert second.stop_reason == "budget_exhausted" and backend.calls == 5
    # the YAML shape of a plugin entry
    entry = {"name": "budget_guard", "options": {"max_tokens": 12}}
    third = sampler(backend, plugins=[entry]).sample_sync(
        "one two", requirements=[never], loop_budget=5
    )
    assert third.stop_reason == "stopped_by_plugin" and backend.calls == 8
    assert BudgetGuard(max_tokens=7).max_tokens_per_call == 7
    assert BudgetGuard(environ={ENV_VAR: "max_tokens=9"}).max_tokens == 9
    with pytest.raises(ValueError, match="another name for max_tokens_per_call"):
        BudgetGuard(max_tokens=5, max_tokens_per_call=6)


def test_a_bad_budget_guard_option_names_the_plugin_and_the_option(sampler, scripted_backend):
    from sampling_core.errors import PluginError

    for options, says in [({"max_tokens": "lots"}, "max_tokens"), ({"max_tokns": 5}, "max_tokens")]:
        with pytest.raises(PluginError, match=says) as caught:
            sampler(scripted_backend(["x"]), plugins=[("budget_guard", options)])
        assert "budget_guard" in str(caught.value)


def test_max_usd_is_the_per_call_dollar_ceiling(sampler, scripted_backend, monkeypatch):
    """``budget_guard`` takes ``max_usd`` (per call, like ``max_tokens``)."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    backend = scripted_backend(priced_reply(0.04))
    s = sampler(backend, plugins=[("budget_guard", {"max_usd": 0.10})])
    result = s.sample_sync("q", requirements=[never], loop_budget=9)
    assert result.stop_reason == "stopped_by_plugin" and backend.calls == 3
    assert BudgetGuard(max_usd=0.5).max_usd_per_call == 0.5
    assert BudgetGuard(environ={ENV_VAR: "max_usd=0.25"}).max_usd == 0.25
    with pytest.raises(ValueError, match="another name for max_usd_per_call"):
        BudgetGuard(max_usd=0.5, max_usd_per_call=0.6)
