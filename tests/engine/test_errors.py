"""Backend errors, StopSampling at every hook, and sampling_loop_end on every path."""

from __future__ import annotations

import subprocess
import sys

import anyio
import pytest

from hook_specs import HookName, hookimpl
from sampling_core import (
    GenerationRequest,
    PluginError,
    RetryPolicy,
    Sampler,
    ScriptedBackend,
    StopSampling,
    TransientBackendError,
)

pytestmark = pytest.mark.anyio

H = HookName


def never(text: str) -> bool:
    """never passes"""
    return False


def is_ok(text: str) -> bool:
    """says ok"""
    return text == "ok"


class Boom(RuntimeError):
    pass


def _ends(hook_recorder):
    return hook_recorder.payloads(H.SAMPLING_LOOP_END)


async def test_loop_end_fires_once_on_success(hook_recorder):
    sampler = Sampler(ScriptedBackend(["ok"]), plugins=[hook_recorder], load_entrypoints=False)
    result = await sampler.sample("q", requirements=[is_ok], concurrency_budget=3)
    (end,) = _ends(hook_recorder)
    assert (end.success, end.stop_reason, end.text) == (True, "success", "ok")
    assert end.iterations_used == result.iterations_used
    assert (
        hook_recorder.names()[0] == "sampling_loop_start"
        and hook_recorder.names()[-1] == "sampling_loop_end"
    )


async def test_loop_end_fires_once_when_the_budget_is_exhausted(hook_recorder):
    sampler = Sampler(ScriptedBackend(["no"]), plugins=[hook_recorder], load_entrypoints=False)
    result = await sampler.sample("q", requirements=[never], loop_budget=3, concurrency_budget=2)
    (end,) = _ends(hook_recorder)
    assert (result.success, result.stop_reason) == (False, "budget_exhausted")
    assert (end.success, end.stop_reason, end.iterations_used) == (False, "budget_exhausted", 6)
    assert result.text == "no"  # the best failed attempt is still returned


async def test_repairs_fire_loop_budget_minus_one_times_per_failing_subsample(hook_recorder):
    sampler = Sampler(ScriptedBackend(["no"]), plugins=[hook_recorder], load_entrypoints=False)
    await sampler.sample("q", requirements=[never], loop_budget=4, concurrency_budget=3)
    repairs = hook_recorder.payloads(H.SAMPLING_REPAIR)
    assert len(repairs) == 3 * 3
    for index in range(3):
        mine = [r for r in repairs if r.subsample_index == index]
        assert [r.attempt for r in mine] == [1, 2, 3]
        assert [r.next_attempt for r in mine] == [2, 3, 4]


async def test_no_repair_when_loop_budget_is_one(hook_recorder):
    sampler = Sampler(ScriptedBackend(["no"]), plugins=[hook_recorder], load_entrypoints=False)
    await sampler.sample("q", requirements=[never], loop_budget=1, concurrency_budget=4)
    assert hook_recorder.payloads(H.SAMPLING_REPAIR) == []
    assert len(hook_recorder.payloads(H.SAMPLING_ITERATION)) == 4


async def test_a_backend_error_with_no_completed_attempt_is_raised_as_itself(hook_recorder):
    backend = ScriptedBackend(["x"], failures=lambda request: Boom("backend down"))
    sampler = Sampler(backend, plugins=[hook_recorder], load_entrypoints=False)
    with pytest.raises(Boom, match="backend down"):
        await sampler.sample("q", loop_budget=3, concurrency_budget=2)
    (end,) = _ends(hook_recorder)
    assert end.stop_reason == "error" and isinstance(end.exception, Boom)
    assert end.error_count == 2
    errors = hook_recorder.payloads(H.GENERATION_ERROR)
    assert len(errors) == 2 and not any(e.will_retry for e in errors)
    assert backend.calls == 2  # a non-transient error ends its subsample: no repair


async def test_backend_errors_are_recorded_when_some_attempt_completed(hook_recorder):
    def fail(request: GenerationRequest):
        return Boom("subsample 1 broke") if request.iteration.subsample_index == 1 else None

    backend = ScriptedBackend(["no"], failures=fail)
    sampler = Sampler(backend, plugins=[hook_recorder], load_entrypoints=False)
    result = await sampler.sample("q", requirements=[never], loop_budget=2, concurrency_budget=2)
    assert result.stop_reason == "budget_exhausted"
    assert [(e.subsample_index, e.attempt) for e in result.errors] == [(1, 1)]
    assert isinstance(result.errors[0].exception, Boom)
    assert str(result.errors[0]) == "subsample 1, attempt 1: Boom: subsample 1 broke"
    assert result.iterations_used == 2  # the errored attempt is not counted
    assert result.cancelled == 0


async def test_transient_errors_are_retried_without_consuming_loop_budget(hook_recorder):
    failures = {1: TransientBackendError("rate limited", retry_after=0.0, status=429)}
    backend = ScriptedBackend(["ok"], failures=failures)
    sampler = Sampler(
        backend,
        plugins=[hook_recorder],
        load_entrypoints=False,
        retry=RetryPolicy(max_retries=2, base_delay=0.0),
    )
    result = await sampler.sample("q", requirements=[is_ok], loop_budget=1)
    assert result.success and backend.calls == 2
    (error,) = hook_recorder.payloads(H.GENERATION_ERROR)
    assert error.will_retry and error.retry == 0 and error.error_type == "TransientBackendError"
    assert [p.retry for p in hook_recorder.payloads(H.GENERATION_PRE_CALL)] == [0, 1]
    assert result.attempts[0].attempt == 1


async def test_transient_retries_stop_at_their_own_budget():
    backend = ScriptedBackend(["ok"], failures=lambda r: TransientBackendError("503", status=503))
    sampler = Sampler(
        backend, load_entrypoints=False, retry=RetryPolicy(max_retries=2, base_delay=0.0)
    )
    with pytest.raises(TransientBackendError):
        await sampler.sample("q", loop_budget=5)
    assert backend.calls == 3


def _stopper(hook: HookName, nth: int = 1):
    """A plugin named StopAt that raises StopSampling in ``hook`` the ``nth`` time it fires."""
    fired = 0

    def fire(self, payload):
        nonlocal fired
        fired += 1
        if fired == nth:
            raise StopSampling(f"stop in {hook.value}")

    fire.__name__ = hook.value
    return type("StopAt", (), {hook.value: hookimpl(fire)})()


@pytest.mark.parametrize(
    "hook",
    [
        H.SAMPLING_ITERATION,
        H.SAMPLING_REPAIR,
        H.GENERATION_PRE_CALL,
        H.GENERATION_POST_CALL,
    ],
)
async def test_stop_sampling_from_an_attempt_hook_ends_the_loop(hook, hook_recorder):
    backend = ScriptedBackend(["no"], latency=0.001)
    sampler = Sampler(
        backend, plugins=[hook_recorder, _stopper(hook, nth=2)], load_entrypoints=False
    )
    result = await sampler.sample("q", requirements=[never], loop_budget=5, concurrency_budget=1)
    assert result.stop_reason == "stopped_by_plugin" and not result.success
    assert result.iterations_used < 5
    (end,) = _ends(hook_recorder)
    assert end.stop_reason == "stopped_by_plugin"


@pytest.mark.parametrize("concurrency_budget", [1, 2])
async def test_stopped_by_plugin_outranks_success_in_the_stop_reason(
    concurrency_budget, hook_recorder
):
    # The plugin stops on the passing attempt's own event: the answer is the passing one,
    # and the call still says it was stopped (as the docs say: consistently at every hook).
    sampler = Sampler(
        ScriptedBackend(["ok"]),
        plugins=[hook_recorder, _stopper(H.SAMPLING_ITERATION)],
        load_entrypoints=False,
    )
    result = await sampler.sample(
        "q", requirements=[is_ok], loop_budget=3, concurrency_budget=concurrency_budget
    )
    assert result.success and result.text == "ok"
    assert result.stop_reason == "stopped_by_plugin"
    (end,) = _ends(hook_recorder)
    assert (end.stop_reason, end.success) == ("stopped_by_plugin", True)


async def test_stop_sampling_from_generation_error_ends_the_loop(hook_recorder):
    backend = ScriptedBackend(["x"], failures={2: TransientBackendError("429")})
    sampler = Sampler(
        backend,
        plugins=[hook_recorder, _stopper(H.GENERATION_ERROR)],
        load_entrypoints=False,
        retry=RetryPolicy(base_delay=0.0),
    )
    result = await sampler.sample("q", requirements=[never], loop_budget=4)
    assert result.stop_reason == "stopped_by_plugin" and result.iterations_used == 1
    assert backend.calls == 2


async def test_stop_sampling_in_loop_start_makes_no_generation(hook_recorder):
    backend = ScriptedBackend(["x"])
    sampler = Sampler(
        backend, plugins=[hook_recorder, _stopper(H.SAMPLING_LOOP_START)], load_entrypoints=False
    )
    result = await sampler.sample("q", loop_budget=3, concurrency_budget=3)
    assert backend.calls == 0
    assert (result.stop_reason, result.success, result.text) == ("stopped_by_plugin", False, None)
    assert len(_ends(hook_recorder)) == 1


async def test_stop_sampling_in_loop_end_is_a_plugin_error(hook_recorder):
    sampler = Sampler(
        ScriptedBackend(["ok"]),
        plugins=[hook_recorder, _stopper(H.SAMPLING_LOOP_END)],
        load_entrypoints=False,
    )
    result = await sampler.sample("q", requirements=[is_ok])
    assert result.stop_reason == "success"
    (fault,) = result.plugin_errors
    assert fault.hook == "sampling_loop_end" and fault.plugin_name == "StopAt"
    assert str(fault) == "StopAt, sampling_loop_end: stop in sampling_loop_end"


async def test_stop_sampling_cancels_in_flight_attempts():
    async def reply(request: GenerationRequest) -> str:
        if request.iteration.subsample_index == 0:
            await anyio.sleep(0.01)  # its siblings are in flight by then
            return "no"
        await anyio.sleep(30)
        return "late"

    sampler = Sampler(
        ScriptedBackend(reply),
        plugins=[_stopper(H.SAMPLING_ITERATION)],
        load_entrypoints=False,
    )
    with anyio.fail_after(10):
        result = await sampler.sample("q", requirements=[never], concurrency_budget=3)
    assert result.stop_reason == "stopped_by_plugin"
    assert result.cancelled == 2 and result.iterations_used == 1
    assert result.text == "no"  # picked from the completed attempts as usual


async def test_a_failing_requirement_check_fails_the_attempt_with_a_reason():
    def broken(text: str) -> bool:
        """broken check"""
        raise KeyError("nope")

    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False)
    result = await sampler.sample("q", requirements=[broken])
    (validation,) = result.attempts[0].validations
    assert not validation.passed and "KeyError" in validation.reason


async def test_plugin_error_in_pre_call_fails_closed_and_loop_end_sees_it(hook_recorder):
    class Broken:
        @hookimpl
        def generation_pre_call(self, payload):
            raise ValueError("bad options")

    backend = ScriptedBackend(["x"])
    sampler = Sampler(backend, plugins=[hook_recorder, Broken()], load_entrypoints=False)
    with pytest.raises(PluginError) as caught:
        await sampler.sample("q", concurrency_budget=2)
    assert caught.value.plugin_name == "Broken" and caught.value.hook == "generation_pre_call"
    assert isinstance(caught.value.__cause__, ValueError)
    assert backend.calls == 0
    (end,) = _ends(hook_recorder)
    assert end.stop_reason == "error" and isinstance(end.exception, PluginError)


KEYBOARD_INTERRUPT_SCRIPT = """
import sys, anyio
from sampling_core import Sampler, ScriptedBackend

def reply(request):
    if request.iteration.subsample_index == 1:
        raise KeyboardInterrupt
    return "x"

async def main():
    sampler = Sampler(ScriptedBackend(reply, latency=0.001), load_entrypoints=False)
    await sampler.sample("q", requirements=[lambda t: False], concurrency_budget=3, loop_budget=2)

try:
    anyio.run(main, backend=sys.argv[1])
except KeyboardInterrupt:
    print("propagated: KeyboardInterrupt")
"""


@pytest.mark.parametrize("loop", ["asyncio", "trio"])
def test_keyboard_interrupt_from_the_backend_propagates_as_itself(loop):
    # In a child process: a KeyboardInterrupt escapes the event loop by design.
    done = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-c", KEYBOARD_INTERRUPT_SCRIPT, loop],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "propagated: KeyboardInterrupt"
    assert "Task was destroyed" not in done.stderr and "never awaited" not in done.stderr


async def test_stop_sampling_raised_by_a_requirement_check_stops_the_loop():
    def stop_now(text: str) -> bool:
        """stops"""
        raise StopSampling("enough")

    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False)
    result = await sampler.sample("q", requirements=[stop_now], loop_budget=3)
    assert result.stop_reason == "stopped_by_plugin" and result.iterations_used == 0
    assert result.errors == []


async def test_the_sampler_closes_its_backend():
    class Closable(ScriptedBackend):
        closed = False

        async def aclose(self):
            self.closed = True

    backend = Closable(["x"])
    async with Sampler(backend, load_entrypoints=False) as sampler:
        await sampler.sample("q")
    assert backend.closed


async def test_the_sampler_closes_its_backend_even_when_cancelled():
    class SlowToClose(ScriptedBackend):
        closed = False

        async def aclose(self):
            await anyio.sleep(0.001)  # a checkpoint: a cancelled scope would stop here
            self.closed = True

    backend = SlowToClose(["x"])
    sampler = Sampler(backend, load_entrypoints=False)
    with anyio.CancelScope() as scope:
        scope.cancel()
        await sampler.aclose()
    assert backend.closed
