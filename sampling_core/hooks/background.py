"""Background delivery: ``@background`` observers' events, queued and delivered by workers.

A ``Sampler`` owns one :class:`BackgroundDelivery`. The hook channel puts each event of a
``@background`` implementation (the implementation and its payload, a read-only snapshot)
in its plugin's *lane*: every plugin has its own queue and worker thread, started on its
first event, that takes the events off in the order they were put and calls the
implementation: a plain function right there (off the event loop, so blocking I/O holds up
nothing), an ``async`` one on the worker's own asyncio event loop. Events are therefore
delivered in order per plugin, and one plugin's slowness never holds up another's.

Nothing an observer does can hang the program:

* every event has ``timeout`` seconds (``Sampler(plugin_timeout=...)``, else
  :data:`DEFAULT_TIMEOUT_S`). An ``async`` observer still running then is cancelled; a
  watchdog thread finds a plain one still running, reports it (a :class:`PluginTimeout`
  fault naming the plugin and the hook) and *abandons* it: the call goes on in its daemon
  thread, and until it returns that plugin's later events are not delivered (they are
  counted and reported as one more fault), so a stuck plugin neither piles up threads nor
  holds the queue. When the call returns, delivery to the plugin resumes;
* anything an observer raises, ``SystemExit`` and ``KeyboardInterrupt`` included, is an
  isolated fault: logged as ``plugin.error`` with the plugin's name and kept in
  :attr:`faults`, and delivery goes on;
* :meth:`drain` waits until every event put so far was delivered or reported as not
  delivered, so ``aclose()``, ``sample_sync``, the end of a batch run and interpreter exit
  return within the timeout. Called from an observer (one that uses the sampler: a nested
  ``sample_sync`` or ``aclose()``), it does not wait (a worker cannot wait for itself):
  the nested call works, and its events are delivered after the observer returns;
* a Ctrl-C does not cut delivery short (a slow observer, such as one writing to a remote
  tracking server, still gets its events): once ``sample_sync``, a batch run or the
  interpreter's exit is interrupted by Ctrl-C, a drain that waits more than a second
  says what it waits for (:mod:`~sampling_core.hooks.drain_wait`); a second Ctrl-C
  stops the waiting :data:`INTERRUPT_GRACE_S` seconds later (:meth:`hurry`): until then
  the observers that keep up go on delivering, then one still running is left running
  and reported. The end of a batch run does the same (:meth:`adrain_at_end`).

When ``maxsize`` events (default 10,000) are queued the engine waits for room, without
blocking its event loop and without a thread (:meth:`put` looks again after a pause, and a
cancellation ends its wait at once): nothing is dropped while the observers keep up (an
observer's own nested calls never wait: they may go over the bound).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import inspect
import sys
import threading
import time
import weakref
from collections import deque
from typing import Any

import anyio.to_thread
import structlog

from hook_specs.names import HookName
from hook_specs.payloads import HookPayload
from sampling_core.hooks.drain_wait import FIRST_PAUSE_S, DrainWait, longer
from sampling_core.hooks.faults import (
    Faults,
    PluginTimeout,
    left_running,
    not_awaited,
    not_delivered,
)
from sampling_core.hooks.table import HookImplementation

__all__ = ["DEFAULT_MAXSIZE", "DEFAULT_TIMEOUT_S", "INTERRUPT_GRACE_S", "BackgroundDelivery"]

logger = structlog.get_logger("samplehooks")

DEFAULT_MAXSIZE = 10_000
DEFAULT_TIMEOUT_S = 30.0
"""How long a background event may take when the sampler sets no ``plugin_timeout``."""
IDLE_S = 2.0
"""A worker with nothing to deliver for this long stops (a new event starts another)."""
INTERRUPT_GRACE_S = 2.0
"""Once the waiting is stopped (:meth:`BackgroundDelivery.hurry`: a second Ctrl-C), how
long an event may still run before its observer is left running and reported."""
ASYNC_GRACE_S = 0.5
"""An ``async`` observer is cancelled at the timeout; the watchdog waits this much longer
for one that blocks its thread (and so cannot be cancelled)."""

_delivering = threading.local()
"""``active`` is set in every worker thread: a drain or a put from there must not wait."""

Event = tuple[HookName, HookImplementation, HookPayload]


class _Lane:
    """One plugin's events and the worker that delivers them, one at a time."""

    __slots__ = (
        "behind",
        "current",
        "deadline",
        "items",
        "ready",
        "returned",
        "skipped",
        "stalled",
        "worker",
    )

    def __init__(self, lock: threading.Lock) -> None:
        self.items: deque[Event] = deque()
        self.ready = threading.Condition(lock)
        self.worker: threading.Thread | None = None
        self.current: Event | None = None  # the event being delivered, unless abandoned
        self.deadline = 0.0
        self.returned = 0.0  # when it last returned from an event (monotonic)
        self.stalled: Event | None = None  # the abandoned event whose call has not returned
        self.behind = False  # abandoned while it kept up with its events (hurried), not stuck
        self.skipped = 0  # events not delivered while stalled, not yet reported


class BackgroundDelivery:
    """Per-plugin queues of background events, their workers, and a watchdog."""

    def __init__(
        self,
        maxsize: int = DEFAULT_MAXSIZE,
        timeout: float | None = None,
    ) -> None:
        self.maxsize = maxsize
        self.timeout = DEFAULT_TIMEOUT_S if timeout is None else timeout
        self.faults = Faults()  # bounded per plugin and hook
        self.delivered = 0
        self._lock = threading.Lock()
        self._watch = threading.Condition(self._lock)  # the watchdog's sleep
        self._lanes: dict[str, _Lane] = {}
        self._count = 0  # events queued or being delivered (not abandoned)
        self._watchdog: threading.Thread | None = None
        self._at_exit = False
        self._hurry_until: float | None = None  # when hurried: no event runs past this
        self._hurry_grace = INTERRUPT_GRACE_S  # the grace it was given (for the reports)
        self._hurried_at = 0.0  # when the hurry began (a later, shorter one keeps it)

    async def put(self, hook: HookName, impl: HookImplementation, payload: HookPayload) -> None:
        """Queue one event. While ``maxsize`` events are queued it waits for room in its own
        task, without a thread: it looks again after a pause (as a drain does), so the event
        loop goes on, and a cancellation ends the wait at once with nothing queued."""
        event = (hook, impl, payload)
        pause = FIRST_PAUSE_S
        while True:
            with self._lock:
                if self._count < self.maxsize or _in_worker():
                    self._add(event)
                    return
            await anyio.sleep(pause)
            pause = longer(pause)

    def pending(self) -> int:
        """Events queued or being delivered (an abandoned one is not counted)."""
        return self._count

    def drain(self, interrupted: bool = False) -> None:
        """Block until every event put so far was delivered, or reported as not delivered
        (its plugin did not return within the timeout). From an observer: returns at once.

        ``interrupted``: the program was interrupted (Ctrl-C) already. A Ctrl-C while it
        waits does not cut delivery short: the first is kept (the drain then says what it
        waits for, if that takes more than a second), the next calls
        :meth:`hurry`; the first is raised once every event is accounted for. It polls,
        as :meth:`adrain` does: a Ctrl-C landing in a wait on the delivery's lock could
        leave the lock broken.
        """
        if _in_worker():
            return
        wait = DrainWait(interrupted)
        hurried = False
        try:
            while True:
                try:
                    pause = wait.next_pause(self._count, self._notice)
                    if pause is None:
                        break
                    time.sleep(pause)
                except KeyboardInterrupt as interruption:
                    if wait.interrupted_by(interruption):
                        self.hurry()
                        hurried = True
        finally:
            if hurried:
                self._calm()
        self._report_all_skipped()
        if wait.caught is not None:
            raise wait.caught

    def hurry(self, grace: float = INTERRUPT_GRACE_S) -> None:
        """Stop waiting for the observers, ``grace`` seconds from now: an event still
        running then, or starting later, is left running and reported, as at its timeout,
        and its plugin's queued events with it. Until then the observers that keep up go
        on delivering, so a drain returns within about ``grace`` seconds.

        :meth:`drain` and :meth:`adrain_at_end` call it on a second Ctrl-C and end it when
        they return (:meth:`_calm`): a sampler used again afterwards (in a notebook)
        delivers as before.
        """
        with self._lock:
            now = time.monotonic()
            until = now + grace
            if self._hurry_until is None:
                self._hurried_at = now
            elif self._hurry_until <= until:
                return
            self._hurry_until, self._hurry_grace = until, grace
            for lane in self._lanes.values():
                if lane.current is not None and lane.deadline > until:
                    lane.deadline = until
            self._watch.notify()

    def _calm(self) -> None:
        """End :meth:`hurry`: events get their whole timeout again."""
        with self._lock:
            self._hurry_until = None

    def _notice(self) -> None:
        """Say what a drain after a Ctrl-C waits for, and how to stop waiting."""
        with self._lock:
            running = sorted(name for name, lane in self._lanes.items() if lane.current)
            pending = self._count
        logger.warning(
            "background.waiting",
            plugins=running,
            pending_events=pending,
            hint="waiting for background observers to finish; press Ctrl-C again to stop",
        )

    def _report_all_skipped(self) -> None:
        with self._lock:
            for name, lane in self._lanes.items():
                self._report_skipped(name, lane)

    async def adrain(self) -> None:
        """:meth:`drain`, awaited without blocking the event loop (cancellable).

        It polls (every millisecond at first, every 50 ms at most) rather than wait in a
        worker thread: a thread left waiting by a cancelled drain would hold up the
        interpreter's exit after a Ctrl-C."""
        if _in_worker():
            return
        wait = DrainWait(interrupted=False)
        while (pause := wait.next_pause(self._count, self._notice)) is not None:
            await anyio.sleep(pause)
        self._report_all_skipped()

    async def adrain_at_end(self, interrupted: bool = False) -> BaseException | None:
        """:meth:`adrain` at the end of a program's work (a batch run's), where an
        interruption (Ctrl-C, a cancellation) must not cut the cleanup short.

        As :meth:`drain` does: interrupted once (``interrupted``: before it was called, or
        while it waits), it goes on delivering, saying what it waits for after
        a second; the next interruption calls :meth:`hurry` and waits for
        the rest shielded, through any further ``KeyboardInterrupt`` (the hurry bounds
        that wait). Returns the first interruption it caught, for the caller to raise once
        it has cleaned up; ``None`` when there was none. (A cancellation that stays in
        force, such as an expired ``move_on_after``, interrupts it twice at once.)
        """
        if _in_worker():
            return None
        wait = DrainWait(interrupted)
        while True:
            try:
                pause = wait.next_pause(self._count, self._notice)
                if pause is None:
                    break
                await anyio.sleep(pause)
            except (KeyboardInterrupt, anyio.get_cancelled_exc_class()) as interruption:
                if wait.interrupted_by(interruption):
                    self.hurry()
                    try:
                        await self._rest_shielded()
                    finally:
                        self._calm()
                    break
        self._report_all_skipped()
        return wait.caught

    async def _rest_shielded(self) -> None:
        """Wait for what is left once hurried, shielded from cancellation; a further
        ``KeyboardInterrupt`` (trio delivers it through shields) does not end the wait."""
        with anyio.CancelScope(shield=True):
            while True:
                try:
                    await self.adrain()
                    return
                except KeyboardInterrupt:
                    continue

    # -- under the lock -------------------------------------------------------------------

    def _add(self, event: Event) -> None:
        name = event[1].plugin_name
        lane = self._lanes.get(name)
        if lane is None:
            lane = self._lanes[name] = _Lane(self._lock)
        if lane.stalled is not None:
            lane.skipped += 1  # its plugin is stuck in an earlier event
            return
        lane.items.append(event)
        self._count += 1
        if lane.worker is None:
            worker = threading.Thread(target=self._work, args=(name, lane), daemon=True)
            worker.name = f"samplehooks-background-{name}"
            lane.worker = worker
            worker.start()
        else:
            lane.ready.notify()
        if self._watchdog is None:
            self._watchdog = threading.Thread(target=self._watch_lanes, daemon=True)
            self._watchdog.name = "samplehooks-background-watchdog"
            self._watchdog.start()
        if not self._at_exit:
            self._at_exit = True
            atexit.register(_drain_at_exit, weakref.ref(self))

    def _done(self, count: int) -> None:
        self._count -= count

    def _fault(self, name: str, hook: str, exc: BaseException) -> None:
        self.faults.add(name, hook, exc)

    def _report_skipped(self, name: str, lane: _Lane) -> None:
        if lane.skipped and lane.stalled is not None:
            hook = lane.stalled[0].value
            self._fault(name, hook, not_delivered(lane.skipped, hook, lane.behind))
            lane.skipped = 0

    # -- the threads ------------------------------------------------------------------------

    def _work(self, name: str, lane: _Lane) -> None:
        """A lane's worker: deliver its events in order; stop after ``IDLE_S`` without one."""
        _delivering.active = True
        loop = asyncio.new_event_loop()
        try:
            while True:
                with self._lock:
                    if not lane.items and not lane.ready.wait_for(lambda: lane.items, IDLE_S):
                        lane.worker = None
                        if lane.stalled is None:
                            self._lanes.pop(name, None)
                        return
                    event = lane.items.popleft()
                    lane.current = event
                    grace = ASYNC_GRACE_S if event[1].is_async else 0.0
                    deadline = time.monotonic() + self.timeout + grace
                    if self._hurry_until is not None:  # sooner than the watchdog may know
                        deadline = min(deadline, self._hurry_until)
                        self._watch.notify()
                    lane.deadline = deadline
                failure = self._call(loop, event)
                with self._lock:
                    lane.returned = time.monotonic()
                    if lane.current is event:  # delivered (not abandoned by the watchdog)
                        lane.current = None
                        self.delivered += 1
                        if failure is not None:
                            self._fault(name, event[0].value, failure)
                        self._done(1)
                    else:  # the watchdog gave up on it: the plugin is back, deliver again
                        self._report_skipped(name, lane)
                        lane.stalled, lane.behind = None, False
                del event, failure  # no payload held while the worker waits for the next
        finally:
            loop.close()

    def _call(self, loop: asyncio.AbstractEventLoop, event: Event) -> BaseException | None:
        """Deliver one event; what the observer raised (``BaseException`` too), or ``None``."""
        _, impl, payload = event
        try:
            out = impl.call(payload)
            if impl.is_async:
                return loop.run_until_complete(_bounded(out, self.timeout))
            if out is not None and inspect.isawaitable(out):
                raise not_awaited(out)
        except BaseException as exc:
            return exc
        return None

    def _watch_lanes(self) -> None:
        """The watchdog: abandon an event still running past its deadline; stop when idle.

        It sleeps until the earliest deadline, or for ``timeout`` when no event runs: an
        event started later has a later deadline, so no worker needs to wake it (once
        hurried, a worker starting an event does wake it: that deadline may be sooner)."""
        with self._lock:
            while True:
                now = time.monotonic()
                busy = [(n, lane) for n, lane in self._lanes.items() if lane.current is not None]
                if not busy and self._count == 0:
                    self._watchdog = None
                    return
                for name, lane in busy:
                    if lane.deadline <= now:
                        self._abandon(name, lane)
                waits = [lane.deadline - now for _, lane in busy if lane.current is not None]
                self._watch.wait(max(min(waits, default=self.timeout), 0.001))

    def _abandon(self, name: str, lane: _Lane) -> None:
        event = lane.current
        assert event is not None
        hook = event[0].value
        grace = None if self._hurry_until is None else self._hurry_grace
        # Hurried, one that returned from an event since is behind (too many queued), not stuck.
        behind = grace is not None and lane.returned >= self._hurried_at
        self._fault(name, hook, left_running(self.timeout, grace, behind))
        lane.current, lane.stalled, lane.behind = None, event, behind
        lane.skipped += len(lane.items)
        dropped = len(lane.items) + 1
        lane.items.clear()
        self._done(dropped)


def _in_worker() -> bool:
    return getattr(_delivering, "active", False)


async def _bounded(pending: Any, timeout: float) -> BaseException | None:
    """Await an async observer for at most ``timeout`` seconds; what it raised, or ``None``."""
    try:
        async with asyncio.timeout(timeout) as scope:
            await pending
    except TimeoutError as exc:
        if scope.expired():
            return PluginTimeout(f"took longer than {timeout:g}s and was cancelled")
        return exc
    except BaseException as exc:
        return exc
    return None


def _drain_at_exit(owner: weakref.ref[BackgroundDelivery]) -> None:
    delivery = owner()
    if delivery is not None:
        with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: the program is ending
            delivery.drain(interrupted=_exiting_on_interrupt())


def _exiting_on_interrupt() -> bool:
    """Whether the interpreter is exiting on an uncaught ``KeyboardInterrupt`` (Ctrl-C):
    the exception Python printed last (``sys.last_exc``, ``sys.last_value`` before 3.12)."""
    last = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    return isinstance(last, KeyboardInterrupt)
