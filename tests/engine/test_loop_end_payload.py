"""The loop end, as in the seed: every attempt, the pick, and why the call failed.

``sampling_loop_end`` carries ``attempts`` (every completed attempt in ``(subsample_index,
attempt)`` order, read-only all the way down), ``picked`` (the picked attempt's
``sequence``) and ``failure_reason`` (one line), on every path: success, exhaustion,
``StopSampling`` and the error path, under asyncio and trio. A strategy whose ``pick``
returns anything but one of the call's attempts, or raises, is an error naming the
strategy; a call with no completed attempt never asks it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, get_type_hints

import pytest

from hook_specs import HookName, ReadOnlyFieldError, StopSampling, hookimpl
from hook_specs.records import Attempt
from sampling_core import BestOfN, PluginError, RejectionSampling, ScriptedBackend, Strategy
from sampling_core.errors import StrategyError
from sampling_core.testing import HookRecorder
from tests.support.engine_helpers import never, passes, strict

pytestmark = pytest.mark.anyio


def identities(attempts: Sequence[Attempt]) -> list[tuple[int, int, int, int, str, bool]]:
    return [
        (a.subsample_index, a.attempt, a.iteration, a.sequence, a.text, a.passed) for a in attempts
    ]


def loop_end(recorder: HookRecorder) -> Any:
    [payload] = recorder.payloads(HookName.SAMPLING_LOOP_END)
    return payload


async def test_on_success_every_attempt_in_position_order_and_the_winners_sequence() -> None:
    def slow_first(request: Any) -> float:
        return 0.03 if request.iteration.subsample_index == 0 else 0.0

    backend = ScriptedBackend(lambda r: f"ok {r.iteration.subsample_index}", latency=slow_first)
    seen = HookRecorder()
    result = await strict(backend, seen).sample(
        "q", requirements=[passes], strategy=BestOfN(), concurrency_budget=2
    )
    end = loop_end(seen)
    # completed s1 first (sequence 1), listed by position; BestOfN's tie goes to s0
    assert identities(end.attempts) == [(0, 1, 1, 2, "ok 0", True), (1, 1, 2, 1, "ok 1", True)]
    assert [[v.passed for v in a.validations] for a in end.attempts] == [[True], [True]]
    assert (end.picked, end.failure_reason, end.text) == (2, None, "ok 0")
    assert end.attempts == result.attempts and result.picked.sequence == end.picked


async def test_on_exhaustion_the_unmet_requirements_of_the_picked_attempt() -> None:
    seen = HookRecorder()
    await strict(ScriptedBackend(["a", "b"]), seen).sample(
        "q", requirements=[never, passes], loop_budget=2
    )
    end = loop_end(seen)
    assert identities(end.attempts) == [(0, 1, 1, 1, "a", False), (0, 2, 2, 2, "b", False)]
    assert end.stop_reason == "budget_exhausted" and end.iterations_used == 2
    assert end.picked == 1  # the best score, ties to the first
    assert end.failure_reason == "unmet requirements: never passes; starts with ok"


class Stopper:
    """Stops sampling after the first completed attempt."""

    @hookimpl
    def sampling_iteration(self, payload: Any) -> None:
        raise StopSampling("enough")


class StopAtStart:
    @hookimpl
    def sampling_loop_start(self, payload: Any) -> None:
        raise StopSampling("not today")


async def test_a_stop_names_the_plugin_that_stopped_the_call() -> None:
    seen = HookRecorder()
    sampler = strict(ScriptedBackend(["a"]), seen)
    sampler.plugins.register(Stopper(), "cost-cap")
    await sampler.sample("q", requirements=[never], loop_budget=3)
    end = loop_end(seen)
    assert identities(end.attempts) == [(0, 1, 1, 1, "a", False)]
    assert (end.stop_reason, end.picked) == ("stopped_by_plugin", 1)
    assert end.failure_reason == "stopped by plugin cost-cap: enough"  # its reason kept


async def test_a_stop_at_loop_start_has_no_attempt_and_no_pick() -> None:
    seen = HookRecorder()
    backend = ScriptedBackend(["a"])
    await strict(backend, StopAtStart(), seen).sample("q", requirements=[never])
    end = loop_end(seen)
    assert (end.attempts, end.picked, end.iterations_used, backend.calls) == ([], None, 0, 0)
    assert end.failure_reason == "stopped by plugin StopAtStart: not today"


class Breaker:
    """Fails closed in the second backend call's pre-call hook."""

    @hookimpl
    def generation_pre_call(self, payload: Any) -> None:
        if payload.attempt == 2:
            raise RuntimeError("quota\nexceeded")


async def test_on_the_error_path_the_attempts_completed_before_the_error() -> None:
    seen = HookRecorder()
    with pytest.raises(PluginError):
        await strict(ScriptedBackend(["a"]), Breaker(), seen).sample(
            "q", requirements=[never], loop_budget=3
        )
    end = loop_end(seen)
    assert identities(end.attempts) == [(0, 1, 1, 1, "a", False)]
    assert (end.stop_reason, end.iterations_used, end.picked) == ("error", 1, None)
    assert end.failure_reason == (
        "PluginError: plugin 'Breaker' failed in generation_pre_call: RuntimeError: quota exceeded"
    )


async def test_the_attempts_are_read_only_all_the_way_down() -> None:
    seen = HookRecorder()
    await strict(ScriptedBackend(["a"]), seen).sample("q", requirements=[never])
    end = loop_end(seen)
    for write in (
        lambda: end.attempts.append(None),
        lambda: setattr(end.attempts[0], "text", "changed"),
        lambda: setattr(end.attempts[0].generation, "text", "changed"),
        lambda: end.attempts[0].messages.append({"role": "user", "content": "x"}),
        lambda: end.attempts[0].messages[0].update(content="x"),
    ):
        with pytest.raises(ReadOnlyFieldError, match="sampling_loop_end"):
            write()


class Copying(RejectionSampling):
    def pick(self, attempts: Sequence[Attempt]) -> Attempt:
        return dataclasses.replace(attempts[0])


class Foreign(RejectionSampling):
    kept: Attempt | None = None

    def pick(self, attempts: Sequence[Attempt]) -> Attempt:
        if Foreign.kept is None:
            Foreign.kept = attempts[0]
        return Foreign.kept


@pytest.mark.parametrize("strategy", [Copying, Foreign])
async def test_a_pick_that_is_not_one_of_the_calls_attempts_is_an_error_naming_the_strategy(
    strategy: type[RejectionSampling],
) -> None:
    Foreign.kept = None
    sampler = strict(ScriptedBackend(["a"]))
    if strategy is Foreign:
        await sampler.sample("q", requirements=[never], strategy=strategy())  # keeps one
    seen = HookRecorder()
    sampler.plugins.register(seen)
    with pytest.raises(TypeError) as raised:
        await sampler.sample("q", requirements=[never], strategy=strategy())
    assert str(raised.value).startswith(
        f"strategy {strategy.__name__!r}: pick() returned an attempt (subsample 0, attempt 1, "
        "sequence 1) of another call, or a copy, which is not one of this call's attempts"
    )
    end = loop_end(seen)
    assert (end.stop_reason, end.picked) == ("error", None)
    assert end.failure_reason.startswith(f"TypeError: strategy {strategy.__name__!r}")


class GivesNone(RejectionSampling):
    def pick(self, attempts: Sequence[Attempt]) -> Attempt:
        return None  # type: ignore[return-value]  # refused: a pick returns an attempt


class Raising(RejectionSampling):
    def pick(self, attempts: Sequence[Attempt]) -> Attempt:
        return {a.text: a for a in attempts}["the answer"]  # a bug: KeyError


class NeverAsked(RejectionSampling):
    def pick(self, attempts: Sequence[Attempt]) -> Attempt:
        raise AssertionError("pick() asked to choose among no attempt")


async def test_a_pick_that_raises_is_an_error_naming_the_strategy() -> None:
    seen = HookRecorder()
    sampler = strict(ScriptedBackend(["a"]), seen)
    with pytest.raises(StrategyError) as raised:
        await sampler.sample("q", requirements=[never], strategy=Raising())
    assert str(raised.value) == "strategy 'Raising': pick() raised KeyError: 'the answer'"
    assert raised.value.strategy_name == "Raising"
    assert isinstance(raised.value.__cause__, KeyError)
    end = loop_end(seen)
    assert (end.stop_reason, end.picked) == ("error", None)
    assert (
        end.failure_reason
        == "StrategyError: strategy 'Raising': pick() raised KeyError: 'the answer'"
    )


async def test_a_pick_that_gives_none_is_refused_naming_the_strategy() -> None:
    with pytest.raises(TypeError, match="strategy 'GivesNone': pick\\(\\) returned None"):
        await strict(ScriptedBackend(["a"])).sample("q", requirements=[never], strategy=GivesNone())
    assert get_type_hints(Strategy.pick)["return"] is Attempt  # typed as it is enforced


async def test_a_call_without_completed_attempts_never_asks_the_strategy_to_pick() -> None:
    result = await strict(ScriptedBackend(["a"]), StopAtStart()).sample(
        "q", requirements=[never], strategy=NeverAsked()
    )
    assert (result.attempts, result.picked, result.text) == ([], None, None)


async def test_no_plugin_on_the_loop_end_builds_no_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    from sampling_core.engine import loop

    def refuse(*args: Any) -> Any:
        raise AssertionError("loop_end_fields built with no plugin on sampling_loop_end")

    monkeypatch.setattr(loop, "loop_end_fields", refuse)
    result = await strict(ScriptedBackend(["ok"])).sample("q", requirements=[passes])
    assert result.success
