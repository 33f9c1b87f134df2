"""Nothing a ``@background`` observer does can hang the program.

A stuck observer is a reported fault after ``plugin_timeout`` and delivery goes on for the
other plugins; ``sample_sync``, ``aclose()``, the end of a batch run, interpreter exit and
Ctrl-C during a run all return; ``SystemExit``/``KeyboardInterrupt`` from an observer are
faults like any other; an observer may use the sampler. Observers block on
``threading.Event`` (released at the end of each test), never on sleeps; the thread joins
and ``fail_after`` are guards against a hang, not timing assertions.
"""

from __future__ import annotations

import _thread
import os
import signal
import subprocess
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from structlog.testing import capture_logs

import sampling_core
from hook_specs import HookName, background, hookimpl
from sampling_core import Sampler, ScriptedBackend
from sampling_core.hooks import background as delivery_module
from sampling_core.hooks.faults import PluginTimeout
from sampling_core.hooks.table import HookImplementation
from sampling_core.runs import run_batch
from tests.support.interrupt_helpers import python_command
from tests.support.runs_helpers import records, write_config, write_dataset

GUARD_S = 60


def never(text: str) -> bool:
    """never passes"""
    return False


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """What stuck observers wait for; set when the test ends, whatever happened."""
    event = threading.Event()
    yield event
    event.set()


def returns(call: Callable[[], Any]) -> Any:
    """``call()`` in a thread; fails (instead of hanging the suite) if it does not return."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(call()), daemon=True)
    thread.start()
    thread.join(GUARD_S)
    assert not thread.is_alive(), f"{call} did not return"
    return out[0]


class Counter:
    """A well-behaved background observer: counts what reaches it."""

    def __init__(self) -> None:
        self.seen: list[int] = []
        self.ends = 0

    @hookimpl
    @background
    def sampling_iteration(self, payload: Any) -> None:
        self.seen.append(payload.sequence)

    @hookimpl
    @background
    def sampling_loop_end(self, payload: Any) -> None:
        self.ends += 1


def stuck_plugin(release: threading.Event, *, is_async: bool = False) -> Any:
    class Stuck:
        calls = 0

        if is_async:

            @hookimpl
            @background
            async def sampling_iteration(self, payload: Any) -> None:
                Stuck.calls += 1
                release.wait()  # blocks its thread: only the watchdog can move on

        else:

            @hookimpl
            @background
            def sampling_iteration(self, payload: Any) -> None:
                Stuck.calls += 1
                release.wait()

    return Stuck()


def faults_of(sampler: Sampler, plugin: str) -> list[str]:
    return [str(f) for f in sampler.background_faults if f.plugin_name == plugin]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async-blocking"])
def test_a_stuck_observer_is_a_fault_after_plugin_timeout_and_sample_sync_returns(
    release: threading.Event, is_async: bool
) -> None:
    counter, stuck = Counter(), stuck_plugin(release, is_async=is_async)
    sampler = Sampler(
        ScriptedBackend(["x"]), plugins=[stuck, counter], load_entrypoints=False, plugin_timeout=0.2
    )
    result = returns(lambda: sampler.sample_sync("q", requirements=[never], loop_budget=3))
    assert result.iterations_used == 3
    assert counter.seen == [1, 2, 3] and counter.ends == 1  # delivery went on for the others
    timed_out, skipped = faults_of(sampler, "Stuck")
    assert timed_out.startswith("Stuck, sampling_iteration: did not return within 0.2s")
    assert skipped == (
        "Stuck, sampling_iteration: 2 later events were not delivered: "
        "its sampling_iteration call is stuck"
    )
    assert all(isinstance(f.exception, PluginTimeout) for f in sampler.background_faults)
    assert type(stuck).calls == 1  # one thread is left with it, never one per event
    release.set()  # the plugin returns: delivery to it resumes (calls go on until it has)
    for _ in range(10_000):
        returns(lambda: sampler.sample_sync("q"))
        if type(stuck).calls > 1:
            break
    assert type(stuck).calls == 2 and counter.ends > 1


@pytest.mark.anyio
async def test_an_async_observer_that_never_finishes_is_cancelled_and_aclose_returns() -> None:
    class Waiting:
        @hookimpl
        @background
        async def sampling_loop_end(self, payload: Any) -> None:
            await anyio.Event().wait()  # nobody sets it

    counter = Counter()
    sampler = Sampler(
        ScriptedBackend(["x"]),
        plugins=[Waiting(), counter],
        load_entrypoints=False,
        plugin_timeout=0.2,
    )
    with anyio.fail_after(GUARD_S):  # a guard against a hang
        await sampler.sample("q")
        await sampler.sample("q")
        await sampler.aclose()
    assert counter.ends == 2
    assert (
        faults_of(sampler, "Waiting")
        == ["Waiting, sampling_loop_end: took longer than 0.2s and was cancelled"] * 2
    )


def test_background_delivery_has_a_bounded_default_timeout() -> None:
    assert Sampler(load_entrypoints=False).background.timeout == delivery_module.DEFAULT_TIMEOUT_S
    assert 0 < delivery_module.DEFAULT_TIMEOUT_S < 600
    assert Sampler(load_entrypoints=False, plugin_timeout=3).background.timeout == 3


@pytest.mark.anyio
async def test_aclose_waits_for_an_event_already_being_delivered(
    release: threading.Event,
) -> None:
    entered, done = threading.Event(), []

    class Busy:
        @hookimpl
        @background
        def sampling_loop_end(self, payload: Any) -> None:
            entered.set()
            release.wait()
            done.append(payload.sampling_id)

    sampler = Sampler(ScriptedBackend(["x"]), plugins=[Busy()], load_entrypoints=False)
    result = await sampler.sample("q")
    await anyio.to_thread.run_sync(entered.wait)  # the event is off the queue, being delivered
    with anyio.move_on_after(0.3) as scope:
        await sampler.aclose()
    assert scope.cancelled_caught  # aclose() was still waiting for it
    release.set()
    with anyio.fail_after(GUARD_S):
        await sampler.aclose()
    assert done == [result.sampling_id] and sampler.background_faults == []


@pytest.mark.parametrize("raised", [SystemExit(3), KeyboardInterrupt()], ids=["exit", "ctrl-c"])
def test_system_exit_and_keyboard_interrupt_from_an_observer_are_faults(
    raised: BaseException,
) -> None:
    class Quitter:
        seen: ClassVar[list[int]] = []

        @hookimpl
        @background
        def sampling_iteration(self, payload: Any) -> None:
            Quitter.seen.append(payload.sequence)
            if payload.sequence == 1:
                raise raised

        @hookimpl
        @background
        async def sampling_loop_end(self, payload: Any) -> None:
            raise raised

    sampler = Sampler(ScriptedBackend(["x"]), plugins=[Quitter()], load_entrypoints=False)
    returns(lambda: sampler.sample_sync("q", requirements=[never], loop_budget=3))
    returns(lambda: sampler.sample_sync("q", requirements=[never], loop_budget=2))
    assert Quitter.seen == [1, 2, 3, 1, 2]  # delivery went on after each
    hooks = [(f.hook, type(f.exception)) for f in sampler.background_faults]
    kind = type(raised)
    assert hooks == [
        ("sampling_iteration", kind),
        ("sampling_loop_end", kind),
        ("sampling_iteration", kind),
        ("sampling_loop_end", kind),
    ]


def test_an_observer_may_call_the_sampler_with_sample_sync_or_await(
    release: threading.Event,
) -> None:
    inner: list[Any] = []

    class Nested:
        def __init__(self, sampler_ref: list[Sampler]) -> None:
            self.sampler_ref = sampler_ref

        @hookimpl
        @background
        def sampling_loop_end(self, payload: Any) -> None:
            if len(inner) < 1:  # the nested call's own loop end comes here too
                inner.append(self.sampler_ref[0].sample_sync("inner"))

        @hookimpl
        @background
        async def generation_post_call(self, payload: Any) -> None:
            if len(inner) == 1:
                inner.append(await self.sampler_ref[0].sample("awaited"))
                await self.sampler_ref[0].aclose()

    ref: list[Sampler] = []
    counter = Counter()
    sampler = Sampler(
        ScriptedBackend(["x"]), plugins=[Nested(ref), counter], load_entrypoints=False
    )
    ref.append(sampler)
    returns(lambda: sampler.sample_sync("outer"))
    returns(sampler.background.drain)
    returns(lambda: sampler.sample_sync("again"))
    assert [r.success for r in inner] == [True, True]
    assert counter.ends >= 4 and sampler.background_faults == []


_children: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def no_child_left() -> Iterator[None]:
    """Kill what a failed test's child processes left running (their observers never end)."""
    yield
    while _children:
        child = _children.pop()
        if child.poll() is None:
            child.kill()
            child.wait()


def run_child(script: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(sampling_core.__file__).parent.parent)}
    child = subprocess.Popen(
        python_command("-c", textwrap.dedent(script), *args),  # Ctrl-C works, even under `&`
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    _children.append(child)
    return child


STUCK_CHILD = """
    import sys, threading
    from hook_specs import background, hookimpl
    from sampling_core import Sampler, ScriptedBackend

    class Stuck:
        @hookimpl
        @background
        def sampling_iteration(self, payload):
            if payload.sequence == 1:
                raise SystemExit(9)  # a fault, not the end of delivery
            threading.Event().wait()  # never set: stuck for good

    sampler = Sampler(
        ScriptedBackend(["x"]), plugins=[Stuck()], load_entrypoints=False, plugin_timeout=0.3
    )
    import asyncio
    asyncio.run(sampler.sample("q", requirements=[lambda t: False], loop_budget=4))
    print("sampled", file=sys.stderr, flush=True)
"""


def test_interpreter_exit_does_not_wait_for_a_stuck_observer() -> None:
    child = run_child(STUCK_CHILD)
    out, err = child.communicate(timeout=GUARD_S)  # a guard against a hang
    assert child.returncode == 0, err
    assert err == "sampled\n"  # (structlog's default logger writes on stdout)
    assert "error_type=SystemExit" in out and "did not return within 0.3s" in out
    assert "2 later events were not delivered" in out


@pytest.mark.anyio
async def test_a_batch_run_with_a_stuck_observer_returns_with_every_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: threading.Event
) -> None:
    monkeypatch.setattr(delivery_module, "DEFAULT_TIMEOUT_S", 0.2)
    dataset = write_dataset(tmp_path / "d.jsonl", 4)
    config = write_config(tmp_path / "c.yaml", dataset)

    class StuckAtEnd:
        @hookimpl
        @background
        def sampling_loop_end(self, payload: Any) -> None:
            release.wait()

    with anyio.fail_after(GUARD_S):  # a guard against a hang
        summary = await run_batch(config, tmp_path / "out", plugins=[StuckAtEnd()])
    assert summary.total == 4 and len(records(tmp_path / "out")) == 4


RUN_CHILD = """
    import sys, threading
    from hook_specs import background, hookimpl
    from sampling_core.hooks import background as delivery
    from sampling_core.runs import run_batch_sync

    delivery.DEFAULT_TIMEOUT_S = 1.0  # what the end of the run may wait for the stuck one

    class Stuck:
        @hookimpl
        @background
        def sampling_loop_end(self, payload):
            print("stuck", file=sys.stderr, flush=True)
            threading.Event().wait()  # never set

    try:
        run_batch_sync(sys.argv[1], sys.argv[2], plugins=[Stuck()])
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr, flush=True)
        sys.exit(130)
"""


def stuck_run(tmp_path: Path, prompts: int, timeout_s: float) -> subprocess.Popen[str]:
    """A child process running ``prompts`` prompts one at a time with an observer stuck from
    the first prompt's end on, given ``timeout_s``; returned once it is stuck."""
    dataset = write_dataset(tmp_path / "d.jsonl", prompts)
    config = write_config(
        tmp_path / "c.yaml",
        dataset,
        backend={"kind": "scripted", "replies": ["a short answer"], "latency_s": 0.01},
        run={"max_concurrent_prompts": 1},
    )
    script = RUN_CHILD.replace("DEFAULT_TIMEOUT_S = 1.0", f"DEFAULT_TIMEOUT_S = {timeout_s}")
    child = run_child(script, str(config), str(tmp_path / "out"))
    assert child.stderr is not None
    assert child.stderr.readline() == "stuck\n"  # the first prompt's observer is stuck
    return child


def test_ctrl_c_during_a_run_with_a_stuck_observer_ends_the_run(tmp_path: Path) -> None:
    child = stuck_run(tmp_path, 200, timeout_s=1.0)
    child.send_signal(signal.SIGINT)  # while the run goes on
    out, err = child.communicate(timeout=GUARD_S)  # a guard against a hang
    assert (child.returncode, err) == (130, "interrupted\n"), out
    assert 1 <= len(records(tmp_path / "out")) < 200


# -- Ctrl-C: the first waits (and says so), the second stops waiting for a stuck observer ---
#
# The timeouts below are far longer than the guard: a drain that waited for them would fail
# the test by its guard, not by a timing assertion.

LONG_TIMEOUT_S = 600.0
WAITING = "background.waiting"  # what a drain says once it waits after a Ctrl-C


@pytest.mark.parametrize("when", ["after the events", "before the events"])
def test_hurry_leaves_a_stuck_observer_and_delivers_every_event_to_the_others(
    release: threading.Event, when: str
) -> None:
    counter = Counter()
    sampler = Sampler(
        ScriptedBackend(["x"]),
        plugins=[stuck_plugin(release), counter],
        load_entrypoints=False,
        plugin_timeout=LONG_TIMEOUT_S,
    )
    if when == "before the events":  # each event then starts with the short deadline
        sampler.background.hurry(0.2)
    result = anyio.run(lambda: sampler.sample("q", requirements=[never], loop_budget=3))
    assert result.iterations_used == 3
    sampler.background.hurry(0.2)  # as Ctrl-C does
    sampler.background.hurry(LONG_TIMEOUT_S)  # a longer grace later changes nothing
    returns(sampler.background.drain)
    assert counter.seen == [1, 2, 3] and counter.ends == 1  # nothing lost for the others
    [stuck, skipped] = faults_of(sampler, "Stuck")
    assert "had not returned 0.2s after the program was interrupted" in stuck
    assert "2 later events were not delivered" in skipped


def test_a_first_ctrl_c_does_not_cut_a_slow_observer_short(release: threading.Event) -> None:
    counter = Counter()
    slow = stuck_plugin(release)  # slow, not stuck: it is released once the drain waits
    sampler = Sampler(
        ScriptedBackend(["x"]),
        plugins=[slow, counter],
        load_entrypoints=False,
        plugin_timeout=LONG_TIMEOUT_S,
    )
    anyio.run(lambda: sampler.sample("q", requirements=[never], loop_budget=3))
    with capture_logs() as logs:
        drained = threading.Thread(target=sampler.background.drain, args=(True,), daemon=True)
        drained.start()  # as sample_sync's drain after a Ctrl-C
        deadline = time.monotonic() + GUARD_S
        while not [e for e in logs if e["event"] == WAITING]:
            assert time.monotonic() < deadline, "the drain never said what it waits for"
            time.sleep(0.01)
        release.set()
        drained.join(GUARD_S)
    assert not drained.is_alive()
    [waiting] = [e for e in logs if e["event"] == WAITING]
    assert waiting["plugins"] == ["Stuck"] and "Ctrl-C again" in waiting["hint"]
    assert type(slow).calls == 3 and counter.seen == [1, 2, 3]  # every event delivered
    assert faults_of(sampler, "Stuck") == []


def interrupt_twice(child: subprocess.Popen[str]) -> tuple[str, str]:
    """Ctrl-C, then (once the child says it waits for its observers) Ctrl-C again; what it
    printed on stdout and stderr."""
    assert child.stdout is not None
    child.send_signal(signal.SIGINT)
    said: list[str] = []

    def until_waiting() -> None:
        for line in child.stdout:  # type: ignore[union-attr]
            said.append(line)
            if WAITING in line:
                return

    returns(until_waiting)
    assert said and WAITING in said[-1], said
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=GUARD_S)  # a guard against a hang
    return "".join(said) + out, err


SAMPLE_SYNC_CHILD = """
    import sys, threading
    from hook_specs import background, hookimpl
    from sampling_core import Sampler, ScriptedBackend

    class Stuck:
        @hookimpl
        @background
        def sampling_iteration(self, payload):
            print("stuck", file=sys.stderr, flush=True)
            threading.Event().wait()  # never set

    sampler = Sampler(
        ScriptedBackend(["x"]), plugins=[Stuck()], load_entrypoints=False,
        plugin_timeout=float(sys.argv[1]),
    )
    sampler.sample_sync("q")  # then waits for the stuck observer: Ctrl-C comes there
"""


def test_ctrl_c_twice_in_sample_sync_stops_waiting_for_a_stuck_observer() -> None:
    child = run_child(SAMPLE_SYNC_CHILD, str(LONG_TIMEOUT_S))
    assert child.stderr is not None
    assert child.stderr.readline() == "stuck\n"
    out, err = interrupt_twice(child)
    assert child.returncode in (-signal.SIGINT, 130) and "KeyboardInterrupt" in err
    assert "had not returned 2s after the program was interrupted" in out


IN_THE_CALL_CHILD = """
    import os, sys, threading
    import anyio
    import sampling_core
    from hook_specs import background, hookimpl
    from sampling_core import Sampler, ScriptedBackend
    from sampling_core.hooks import background as delivery

    delivery.DEFAULT_TIMEOUT_S = float(sys.argv[2])  # what the default sampler waits for

    class Stuck:
        @hookimpl
        @background
        def sampling_iteration(self, payload):
            os.write(2, b"stuck\\n")  # one write: the two threads' lines never mix
            threading.Event().wait()  # never set

    async def reply(request):
        if request.iteration.attempt == 2:  # the call goes on: Ctrl-C comes here
            os.write(2, b"calling\\n")
            await anyio.sleep_forever()
        return "x"

    arguments = dict(
        backend=ScriptedBackend(reply), plugins=[Stuck()], requirements=[lambda t: False],
        loop_budget=2,
    )
    if sys.argv[1] == "function":
        sampling_core.sample_sync("q", **arguments)
    else:
        Sampler(load_entrypoints=False).sample_sync("q", **arguments)
"""


@pytest.mark.parametrize("which", ["function", "method"])
def test_ctrl_c_twice_during_a_sync_call_stops_waiting_for_a_stuck_observer(which: str) -> None:
    """``sampling_core.sample_sync`` is the default sampler's ``sample_sync``: interrupted
    in the call, both say what they wait for, and a second Ctrl-C ends the wait."""
    child = run_child(IN_THE_CALL_CHILD, which, str(LONG_TIMEOUT_S))
    assert child.stderr is not None
    assert sorted(child.stderr.readline() for _ in range(2)) == ["calling\n", "stuck\n"]
    out, err = interrupt_twice(child)
    assert child.returncode in (-signal.SIGINT, 130) and "KeyboardInterrupt" in err
    assert "had not returned 2s after the program was interrupted" in out


EXIT_ON_CTRL_C_CHILD = """
    import asyncio, sys, threading
    from hook_specs import background, hookimpl
    from sampling_core import Sampler, ScriptedBackend

    class Stuck:
        @hookimpl
        @background
        def sampling_iteration(self, payload):
            threading.Event().wait()  # never set

    sampler = Sampler(
        ScriptedBackend(["x"]), plugins=[Stuck()], load_entrypoints=False,
        plugin_timeout=float(sys.argv[1]),
    )
    asyncio.run(sampler.sample("q"))
    print("sampled", file=sys.stderr, flush=True)
    threading.Event().wait()  # the program's own work, until Ctrl-C
"""


def test_ctrl_c_twice_as_the_interpreter_exits_stops_waiting_for_a_stuck_observer() -> None:
    child = run_child(EXIT_ON_CTRL_C_CHILD, str(LONG_TIMEOUT_S))
    assert child.stderr is not None
    assert child.stderr.readline() == "sampled\n"
    out, err = interrupt_twice(child)  # not in samplehooks code: the exit hook waits
    assert child.returncode in (-signal.SIGINT, 130) and "KeyboardInterrupt" in err
    assert "had not returned 2s after the program was interrupted" in out


def test_ctrl_c_twice_during_a_run_stops_waiting_for_a_stuck_observer(tmp_path: Path) -> None:
    child = stuck_run(tmp_path, 200, timeout_s=LONG_TIMEOUT_S)
    out, err = interrupt_twice(child)  # while the run goes on
    assert (child.returncode, err) == (130, "interrupted\n"), out
    assert "had not returned 2s after the program was interrupted" in out
    assert 1 <= len(records(tmp_path / "out")) < 200


def test_ctrl_c_twice_once_a_run_is_done_stops_waiting_for_a_stuck_observer(
    tmp_path: Path,
) -> None:
    child = stuck_run(tmp_path, 3, timeout_s=LONG_TIMEOUT_S)
    wait_for_records(tmp_path / "out", 3)  # every prompt is done: the end waits for it
    out, err = interrupt_twice(child)
    assert (child.returncode, err) == (130, "interrupted\n"), out
    assert "had not returned 2s after the program was interrupted" in out
    assert len(records(tmp_path / "out")) == 3


def wait_for_records(run_dir: Path, count: int) -> None:
    """Until the run directory holds ``count`` records (fails after the guard)."""
    deadline = time.monotonic() + GUARD_S
    while not (run_dir / "records.jsonl").is_file() or len(records(run_dir)) < count:
        assert time.monotonic() < deadline, f"{run_dir} did not get {count} records"
        time.sleep(0.05)


def observer(name: str, function: Callable[[Any], None]) -> HookImplementation:
    """A background implementation of ``sampling_iteration`` named ``name``."""
    return HookImplementation(name, function, takes_payload=True, is_async=False, order=1)


def queue(delivery: delivery_module.BackgroundDelivery, impl: HookImplementation, n: int) -> None:
    async def put_all() -> None:
        for number in range(n):
            await delivery.put(HookName.SAMPLING_ITERATION, impl, number)  # type: ignore[arg-type]

    anyio.run(put_all)


def test_a_hurried_drain_ends_with_its_grace_however_many_events_are_queued() -> None:
    # Each event takes less than the grace: were the grace given to each event, 200 of
    # them would keep the drain for a minute.
    seen: list[Any] = []

    def slow(payload: Any) -> None:
        seen.append(payload)
        threading.Event().wait(0.3)

    delivery = delivery_module.BackgroundDelivery(timeout=LONG_TIMEOUT_S)
    queue(delivery, observer("Slow", slow), 200)
    delivery.hurry(0.5)
    returns(delivery.drain)
    assert 1 <= len(seen) < 200 and delivery.pending() == 0
    [late, skipped] = [str(f) for f in delivery.faults]
    assert "0.5s after the program was interrupted" in late  # behind (or stuck, if slowed)
    assert f"{200 - len(seen)} later events were not delivered" in skipped


def test_after_a_second_ctrl_c_an_observer_only_behind_is_not_called_stuck(
    release: threading.Event,
) -> None:
    """Hurried, the delivery stops waiting for both; the one stuck in an event since before
    the Ctrl-C is called stuck, the one that went on returning from its events is behind."""
    entered = {"Behind": threading.Event(), "Stuck": threading.Event()}
    go_on, on_its_second = threading.Event(), threading.Event()

    def behind(payload: Any) -> None:
        entered["Behind"].set()
        if payload == 1:
            on_its_second.set()
        (go_on if payload == 0 else release).wait()  # returns from its first event only

    def stuck(payload: Any) -> None:
        entered["Stuck"].set()
        release.wait()

    delivery = delivery_module.BackgroundDelivery(timeout=LONG_TIMEOUT_S)
    for impl in (observer("Behind", behind), observer("Stuck", stuck)):
        queue(delivery, impl, 3)
    for event in entered.values():
        assert event.wait(GUARD_S)  # each is in its first event
    delivery.hurry(LONG_TIMEOUT_S)  # as a second Ctrl-C does (with a grace not to race)
    go_on.set()  # meanwhile the one behind returns and starts its next event
    assert on_its_second.wait(GUARD_S)
    delivery.hurry(0.5)  # the grace ends sooner: the hurry began at the first call
    returns(delivery.drain)
    [late, skipped] = faults = [str(f) for f in delivery.faults if f.plugin_name == "Behind"]
    assert "was behind, not stuck, 0.5s after the program was interrupted" in late
    assert "1 later event was not delivered: it was behind" in skipped
    assert not any("stuck in" in f or "call is stuck" in f for f in faults)
    [late, skipped] = [str(f) for f in delivery.faults if f.plugin_name == "Stuck"]
    assert "had not returned 0.5s after the program was interrupted" in late
    assert "2 later events were not delivered: its sampling_iteration call is stuck" in skipped


@pytest.mark.usefixtures("ctrl_c_raises")  # interrupt_main() does nothing if SIGINT is ignored
def test_after_a_ctrl_c_twice_the_delivery_gives_events_their_whole_timeout_again(
    release: threading.Event,
) -> None:
    delivery = delivery_module.BackgroundDelivery(timeout=LONG_TIMEOUT_S)
    queue(delivery, observer("Stuck", lambda payload: release.wait()), 1)
    with capture_logs() as logs:

        def second_ctrl_c() -> None:  # once the drain says it waits (its first was before)
            deadline = time.monotonic() + GUARD_S
            while not [e for e in logs if e["event"] == WAITING]:
                if time.monotonic() > deadline:
                    return
                time.sleep(0.01)
            _thread.interrupt_main()

        threading.Thread(target=second_ctrl_c, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            delivery.drain(interrupted=True)  # as in a notebook cell interrupted twice
    [stuck] = [str(f) for f in delivery.faults]
    assert "had not returned 2s after the program was interrupted" in stuck
    release.set()  # the stuck observer returns; the notebook's next cell, no Ctrl-C:
    done: list[Any] = []
    queue(
        delivery,
        observer("Slow", lambda payload: (threading.Event().wait(0.3), done.append(payload))),
        3,
    )
    returns(delivery.drain)
    assert done == [0, 1, 2] and len(delivery.faults) == 1  # none cut short


def test_events_put_after_the_watchdog_gave_up_are_counted_not_queued(
    release: threading.Event,
) -> None:
    """The events a stuck observer misses are counted, not kept: nothing waits in its queue
    (memory stays flat however long it is stuck), they are never delivered late, and one
    fault says how many there were."""
    got: list[Any] = []

    def stuck_on_the_first(payload: Any) -> None:
        got.append(payload)
        if payload == 0:
            release.wait()

    delivery = delivery_module.BackgroundDelivery(timeout=0.2)
    impl = observer("Stuck", stuck_on_the_first)

    def put(*numbers: int) -> None:
        async def put_all() -> None:
            for number in numbers:
                await delivery.put(HookName.SAMPLING_ITERATION, impl, number)  # type: ignore[arg-type]

        anyio.run(put_all)

    def until_faults(count: int) -> None:
        deadline = time.monotonic() + GUARD_S
        while len(delivery.faults) < count:
            assert time.monotonic() < deadline, f"{count} faults never came"
            time.sleep(0.01)

    put(0)
    until_faults(1)  # the watchdog gave up on event 0
    put(1, 2, 3)  # after it gave up: the observer is still stuck
    assert delivery.pending() == 0  # counted, not queued
    release.set()  # the observer returns: later events reach it again
    until_faults(2)  # its worker saw it return (and reported what it missed)
    put(4)
    returns(delivery.drain)
    assert got == [0, 4]  # 1, 2 and 3 were never delivered, not even late
    [stuck, skipped] = [str(f) for f in delivery.faults]
    assert "did not return within 0.2s" in stuck
    assert "3 later events were not delivered" in skipped


@pytest.mark.anyio
async def test_a_put_waiting_for_room_is_cancelled_at_once_and_queues_nothing(
    release: threading.Event,
) -> None:
    """A full queue holds its producer in its own task, not in a worker thread: cancelling
    the producer ends the wait at once, and the event it was putting is not queued later."""
    got: list[Any] = []

    def slow_on_the_first(payload: Any) -> None:
        got.append(payload)
        if payload == 0:
            release.wait()

    delivery = delivery_module.BackgroundDelivery(maxsize=1, timeout=LONG_TIMEOUT_S)
    impl = observer("Slow", slow_on_the_first)
    await delivery.put(HookName.SAMPLING_ITERATION, impl, 0)  # type: ignore[arg-type]
    guard = threading.Timer(GUARD_S, release.set)  # a guard against a hang: frees a thread
    guard.start()
    try:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as group:
                group.start_soon(delivery.put, HookName.SAMPLING_ITERATION, impl, 1)
                await anyio.wait_all_tasks_blocked()  # the put waits for room
                scope.cancel()
        assert not release.is_set(), "the cancelled put waited until the queue had room"
    finally:
        guard.cancel()
    release.set()
    await delivery.adrain()
    assert got == [0] and delivery.pending() == 0  # the cancelled put queued nothing
