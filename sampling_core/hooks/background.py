"""Background delivery: ``@background`` observers' events, queued and delivered by a worker.

A ``Sampler`` owns one :class:`BackgroundDelivery`. The hook channel puts each event of a
``@background`` implementation (the implementation and its payload, a read-only snapshot)
on a bounded queue; one worker thread, started on the first event, takes them off in the
order they were put and calls the implementation: a plain function right there (off the
event loop, so blocking I/O holds up nothing), an ``async`` one on the worker's own
asyncio event loop. Events are therefore delivered in order, per plugin and overall.

When the queue is full (``maxsize``, default 10,000 events) the engine waits for room,
without blocking its event loop: nothing is dropped. :meth:`drain` returns once every
event put so far has been delivered; the ``Sampler`` calls it from ``aclose()`` and
``sample_sync``, and it runs at interpreter exit. A fault in an observer is isolated:
logged as ``plugin.error`` with the plugin's name and kept in :attr:`faults` (the call
that produced the event has usually returned by then, so it cannot be in its
``result.plugin_errors``).
"""

from __future__ import annotations

import asyncio
import atexit
import inspect
import queue
import threading
import weakref
from typing import Any

import anyio.to_thread

from hook_specs.names import HookName
from hook_specs.payloads import HookPayload
from sampling_core.hooks.faults import PluginFault, log_fault, not_awaited
from sampling_core.hooks.table import HookImplementation

DEFAULT_MAXSIZE = 10_000
IDLE_S = 2.0
"""A worker with nothing to deliver for this long stops (a new event starts another)."""


class BackgroundDelivery:
    """A bounded queue of background events and the worker thread that delivers them."""

    def __init__(self, maxsize: int = DEFAULT_MAXSIZE, max_faults: int = 1000) -> None:
        self.maxsize = maxsize
        self.faults: list[PluginFault] = []
        self.delivered = 0
        self._max_faults = max_faults
        self._queue: queue.Queue[Any] = queue.Queue(maxsize)
        self._worker: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._at_exit = False

    async def put(self, hook: HookName, impl: HookImplementation, payload: HookPayload) -> None:
        """Queue one event; waits (off the event loop) while the queue is full."""
        item = (hook, impl, payload)
        with self._start_lock:  # a worker that is about to stop sees this event
            self._ensure_worker()
            try:
                self._queue.put_nowait(item)
                return
            except queue.Full:
                pass
        await anyio.to_thread.run_sync(self._put_waiting, item)

    def _put_waiting(self, item: Any) -> None:
        self._queue.put(item)  # a worker is running: the queue is full
        with self._start_lock:
            self._ensure_worker()

    def pending(self) -> int:
        """Events queued or being delivered."""
        return self._queue.unfinished_tasks

    def drain(self) -> None:
        """Block until every event queued so far has been delivered."""
        self._queue.join()

    async def adrain(self) -> None:
        """:meth:`drain`, awaited without blocking the event loop."""
        if self._queue.unfinished_tasks:
            await anyio.to_thread.run_sync(self.drain)

    def _ensure_worker(self) -> None:
        """Start the worker if none runs (called under ``_start_lock``)."""
        if self._worker is not None:
            return
        worker = threading.Thread(target=self._work, daemon=True)
        worker.name = "samplehooks-background"
        self._worker = worker
        worker.start()
        if not self._at_exit:
            self._at_exit = True
            atexit.register(_drain_at_exit, weakref.ref(self))

    def _work(self) -> None:
        """The worker thread: deliver events; stop after ``IDLE_S`` without one."""
        loop = asyncio.new_event_loop()
        try:
            while True:
                try:
                    item = self._queue.get(timeout=IDLE_S)
                except queue.Empty:
                    with self._start_lock:
                        if self._queue.empty():
                            self._worker = None
                            return
                    continue
                try:
                    self._deliver(loop, item)
                finally:
                    self._queue.task_done()
        finally:
            loop.close()

    def _deliver(self, loop: asyncio.AbstractEventLoop, item: Any) -> None:
        hook, impl, payload = item
        try:
            out = impl.call(payload)
            if impl.is_async:
                loop.run_until_complete(_await(out))
            elif out is not None and inspect.isawaitable(out):
                raise not_awaited(out)
        except Exception as exc:
            if len(self.faults) < self._max_faults:
                self.faults.append(PluginFault(impl.plugin_name, hook.value, exc))
            log_fault(impl.plugin_name, hook.value, exc)
        self.delivered += 1


async def _await(pending: Any) -> None:
    await pending


def _drain_at_exit(owner: weakref.ref[BackgroundDelivery]) -> None:
    delivery = owner()
    if delivery is not None:
        delivery.drain()
