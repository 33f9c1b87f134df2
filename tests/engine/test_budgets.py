"""Budgets: validated at construction and again after sampling_loop_start hooks ran."""

from __future__ import annotations

import pytest

from hook_specs import HookName, hookimpl
from sampling_core import BudgetError, Sampler, ScriptedBackend

pytestmark = pytest.mark.anyio

BAD_VALUES = [0, -1, True, 2.5]


def never(text: str) -> bool:
    """never passes"""
    return False


class SetBudgets:
    def __init__(self, **values):
        self.values = values

    @hookimpl
    def sampling_loop_start(self, payload):
        for field, value in self.values.items():
            setattr(payload, field, value)


@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("field", ["loop_budget", "concurrency_budget"])
async def test_bad_budgets_from_the_caller_are_refused_before_any_call(field, value):
    backend = ScriptedBackend(["x"])
    sampler = Sampler(backend, load_entrypoints=False)
    with pytest.raises(BudgetError) as caught:
        await sampler.sample("q", **{field: value})
    assert field in str(caught.value) and repr(value) in str(caught.value)
    assert "the caller" in str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert backend.calls == 0


async def test_budgets_above_the_cap_are_refused():
    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False, max_concurrency_budget=8)
    with pytest.raises(BudgetError, match="cap of 8") as caught:
        await sampler.sample("q", concurrency_budget=9)
    assert (caught.value.field, caught.value.value, caught.value.source) == (
        "concurrency_budget",
        9,
        "the caller",
    )
    assert str(caught.value) == (
        "concurrency_budget=9 set by the caller is invalid: "
        "exceeds the sampler's cap of 8 (max_concurrency_budget on Sampler)"
    )
    at_the_cap = await sampler.sample("q", concurrency_budget=8)  # the cap itself is allowed
    assert at_the_cap.success


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (0, "must be >= 1"),
        (-1, "must be >= 1"),
        (True, "must be an int >= 1, not bool"),
        (2.0, "must be an int >= 1, not float"),
        ("3", "must be an int >= 1, not str"),
    ],
)
async def test_each_bad_budget_gets_its_own_message(value, problem):
    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False)
    with pytest.raises(BudgetError) as caught:
        await sampler.sample("q", loop_budget=value)
    assert str(caught.value) == f"loop_budget={value!r} set by the caller is invalid: {problem}"


@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("field", ["loop_budget", "concurrency_budget"])
async def test_bad_budgets_written_by_a_plugin_name_it_and_make_no_call(
    field, value, hook_recorder
):
    backend = ScriptedBackend(["x"])
    sampler = Sampler(
        backend, plugins=[hook_recorder, SetBudgets(**{field: value})], load_entrypoints=False
    )
    with pytest.raises(BudgetError) as caught:
        await sampler.sample("q", loop_budget=2, concurrency_budget=2)
    message = str(caught.value)
    assert field in message and repr(value) in message and "'SetBudgets'" in message
    assert caught.value.source == "plugin 'SetBudgets'"
    assert backend.calls == 0
    ends = hook_recorder.payloads(HookName.SAMPLING_LOOP_END)
    assert len(ends) == 1 and ends[0].stop_reason == "error"
    assert isinstance(ends[0].exception, BudgetError)


async def test_the_last_plugin_that_wrote_is_named():
    class Good:
        @hookimpl(tryfirst=True)
        def sampling_loop_start(self, payload):
            payload.loop_budget = 3

    class Bad:
        @hookimpl(trylast=True)
        def sampling_loop_start(self, payload):
            payload.loop_budget = 0

    sampler = Sampler(ScriptedBackend(["x"]), plugins=[Bad(), Good()], load_entrypoints=False)
    with pytest.raises(BudgetError, match="plugin 'Bad'"):
        await sampler.sample("q")


async def test_budgets_changed_by_a_plugin_are_honoured():
    backend = ScriptedBackend(["x"])
    sampler = Sampler(
        backend, plugins=[SetBudgets(loop_budget=3, concurrency_budget=4)], load_entrypoints=False
    )
    result = await sampler.sample("q", requirements=[never], loop_budget=1, concurrency_budget=1)
    assert backend.calls == 12
    assert result.iterations_used == 12
    assert (result.loop_budget, result.concurrency_budget) == (3, 4)
    assert sorted(a.iteration for a in result.attempts) == list(range(1, 13))


async def test_a_plugin_sees_the_previous_plugins_change():
    seen = []

    class First:
        @hookimpl(tryfirst=True)
        def sampling_loop_start(self, payload):
            payload.concurrency_budget = 2

    class Second:
        @hookimpl
        def sampling_loop_start(self, payload):
            seen.append(payload.concurrency_budget)
            payload.concurrency_budget += 1

    backend = ScriptedBackend(["x"])
    sampler = Sampler(backend, plugins=[First(), Second()], load_entrypoints=False)
    result = await sampler.sample("q", requirements=[never])
    assert seen == [2]
    assert backend.calls == 3 and result.concurrency_budget == 3


async def test_the_attempts_a_call_may_make_are_capped_as_a_product():
    backend = ScriptedBackend(["x"])
    sampler = Sampler(backend, load_entrypoints=False, max_attempts_per_call=12)
    with pytest.raises(BudgetError) as caught:
        await sampler.sample("q", loop_budget=5, concurrency_budget=3)
    assert str(caught.value) == (
        "concurrency_budget=3 set by the caller is invalid: loop_budget x concurrency_budget "
        "= 5 x 3 = 15 attempts exceeds the sampler's cap of 12 (max_attempts_per_call on "
        "Sampler): a call keeps every attempt it makes"
    )
    assert backend.calls == 0
    at_the_cap = await sampler.sample("q", loop_budget=4, concurrency_budget=3)
    assert at_the_cap.success


async def test_the_default_cap_refuses_a_call_whose_attempts_would_not_fit_in_memory():
    backend = ScriptedBackend(["x"])
    sampler = Sampler(backend, load_entrypoints=False)  # both budgets within their own caps
    with pytest.raises(BudgetError, match="max_attempts_per_call"):
        await sampler.sample("q", loop_budget=1_000, concurrency_budget=4_096)
    assert backend.calls == 0


async def test_a_plugin_raising_the_budgets_past_the_attempt_cap_is_named():
    class Greedy:
        @hookimpl
        def sampling_loop_start(self, payload):
            payload.concurrency_budget = 50

    backend = ScriptedBackend(["x"])
    sampler = Sampler(backend, plugins=[Greedy()], load_entrypoints=False, max_attempts_per_call=20)
    with pytest.raises(BudgetError, match=r"plugin 'Greedy'.*= 2 x 50 = 100 attempts"):
        await sampler.sample("q", loop_budget=2, concurrency_budget=1)
    assert backend.calls == 0


def test_sample_and_sample_sync_take_exactly_the_sampler_s_arguments_plus_a_backend():
    """The module-level functions forward each argument by name: one added to
    ``Sampler.sample`` but not to them (or the other way round) is caught here."""
    import inspect

    from sampling_core import Sampler, sample, sample_sync

    method = dict(inspect.signature(Sampler.sample).parameters)
    method.pop("self")
    method.pop("backend", None)
    internal = {name for name in method if name not in inspect.signature(sample).parameters}
    for function in (sample, sample_sync):
        parameters = dict(inspect.signature(function).parameters)
        assert parameters.pop("backend").kind is inspect.Parameter.KEYWORD_ONLY
        assert set(parameters) == set(method) - internal
        for name, parameter in parameters.items():
            assert parameter.default == method[name].default, name
    # what only a batch run passes (the dataset line and its key) is all they leave out
    assert internal <= {"row", "prompt_key"}


@pytest.mark.parametrize("written", [True, 1.0], ids=repr)
async def test_a_budget_written_equal_but_of_another_type_is_still_refused(written):
    # The engine checks a budget again only when a plugin wrote one: equal is not unwritten.
    backend = ScriptedBackend(["x"])
    sampler = Sampler(backend, plugins=[SetBudgets(loop_budget=written)], load_entrypoints=False)
    with pytest.raises(BudgetError, match="SetBudgets") as caught:
        await sampler.sample("q", loop_budget=1)
    assert caught.value.field == "loop_budget" and backend.calls == 0


async def test_budgets_written_back_unchanged_are_kept():
    class WritesThemBack:
        @hookimpl
        def sampling_loop_start(self, payload):
            payload.loop_budget = payload.loop_budget
            payload.concurrency_budget = payload.concurrency_budget

    backend = ScriptedBackend(["x"])
    sampler = Sampler(backend, plugins=[WritesThemBack()], load_entrypoints=False)
    result = await sampler.sample("q", loop_budget=3, concurrency_budget=2)
    assert (result.loop_budget, result.concurrency_budget, result.success) == (3, 2, True)
