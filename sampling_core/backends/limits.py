"""How hard one backend may be driven: requests in flight, requests per minute, adaptive limits.

A :class:`TransportLimits` belongs to one backend object and is shared by every ``sample()``
call that uses it. It combines three independent parts:

* an **in-flight limit**: at most ``max_in_flight`` requests open at once; later requests
  wait their turn, first come first served;
* a **rate limit**: request starts are spaced so that no more than ``rpm`` start in a
  minute (with ``burst`` of them allowed back to back), and a server's ``Retry-After`` on a
  429 holds every new request until it has passed;
* an optional **adaptive concurrency** limit (additive increase, multiplicative decrease):
  each 429 cuts the in-flight limit, each success grows it back slowly, never above
  ``max_in_flight``.

Waiting uses anyio, so the limits work under asyncio and trio. The rate limit and the
adaptive limit are plain numbers guarded by a thread lock, so they also hold across event
loops (``sample_sync`` runs each call in a loop of its own). The in-flight queue needs the
event loop's own primitives: it is kept per event loop, so it bounds the calls that run
concurrently in one loop -- the usual case of many ``sample()`` calls gathered together.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel

__all__ = [
    "AdaptiveConcurrency",
    "InFlightGate",
    "RateLimiter",
    "TransportLimits",
    "per_event_loop",
]

Clock = Callable[[], float]


def per_event_loop() -> Any:
    """A key naming the running event loop (the asyncio loop, or trio's token)."""
    return anyio.lowlevel.current_token().native_token


class InFlightGate:
    """At most ``limit()`` holders at once, within one event loop; waiters are served FIFO.

    ``limit`` is a callable so that the limit may change while requests wait: when it
    shrinks, holders above it finish normally and no waiter enters until the count is
    below the new limit.
    """

    def __init__(self, limit: Callable[[], int]) -> None:
        self._limit = limit
        self.active = 0
        self.peak = 0
        self._waiters: deque[anyio.Event] = deque()

    async def acquire(self) -> None:
        """Wait for a free place and take it."""
        if not self._waiters and self.active < self._limit():
            self._take()
            await anyio.lowlevel.checkpoint_if_cancelled()
            return
        event = anyio.Event()
        self._waiters.append(event)
        try:
            await event.wait()
        except BaseException:
            if event.is_set():  # a place was handed to us as we were cancelled: pass it on
                self.release()
            else:
                self._waiters.remove(event)
            raise

    def release(self) -> None:
        """Give a place back and hand free places to the waiters in arrival order."""
        self.active -= 1
        self._wake()

    def _take(self) -> None:
        self.active += 1
        self.peak = max(self.peak, self.active)

    def _wake(self) -> None:
        while self._waiters and self.active < self._limit():
            self._take()
            self._waiters.popleft().set()


class RateLimiter:
    """Spaces request starts: at most ``rate`` per ``per`` seconds, ``burst`` back to back.

    Every request reserves the next start time on a virtual schedule (GCRA) under a thread
    lock, then sleeps until it: requests start in arrival order, with no per-loop state and
    no herd of sleepers waking together. A request that starts late (its event loop was
    busy) moves the rest of the schedule with it, so starts stay spaced in real time rather
    than bunching up after a stall. A reservation abandoned by cancellation is not given
    back (it errs on the side of fewer requests).
    """

    def __init__(
        self, rate: float, *, per: float = 60.0, burst: int = 1, clock: Clock = time.monotonic
    ) -> None:
        if not rate > 0:
            raise ValueError(f"the rate limit must be > 0 requests per {per:g}s, got {rate!r}")
        if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
            raise ValueError(f"burst must be an int >= 1, got {burst!r}")
        self.interval = per / rate
        self.burst = burst
        self._clock = clock
        self._lock = threading.Lock()
        self._next = -math.inf  # the schedule's next free start
        self._slip = 0.0  # how far late starts have moved the schedule, in total
        self._paused_until = -math.inf

    def reserve(self) -> float:
        """Reserve the next start; returns how many seconds from now it is."""
        start, _ = self._reserve()
        return start - self._clock()

    def _reserve(self) -> tuple[float, float]:
        with self._lock:
            now = self._clock()
            due = max(self._next, now, self._paused_until)
            start = max(now, self._paused_until, due - (self.burst - 1) * self.interval)
            self._next = due + self.interval
            return start, self._slip

    def _admit(self, start: float, slip_then: float) -> float:
        """0 when the reserved start has come (noting how late), else the seconds left."""
        with self._lock:
            now = self._clock()
            due = start + (self._slip - slip_then)
            if now < due - 1e-4:
                return due - now
            late = now - due
            if late > self.interval / 2:
                self._slip += late
                self._next += late
            return 0.0

    def pause(self, seconds: float) -> None:
        """Hold every start for ``seconds`` from now (a server asked to wait)."""
        with self._lock:
            self._paused_until = max(self._paused_until, self._clock() + seconds)

    async def wait(self) -> None:
        """Wait for this request's turn."""
        start, slip_then = self._reserve()
        while (delay := self._admit(start, slip_then)) > 0:
            await anyio.sleep(delay)


class AdaptiveConcurrency:
    """An AIMD concurrency limit: cut by ``decrease`` on overload, grow ``1/limit`` per success.

    Overloads reported by requests that started before the last cut do not cut again:
    a burst of 429s answering one wave of requests counts once.
    """

    def __init__(
        self,
        maximum: int,
        *,
        minimum: int = 1,
        initial: int | None = None,
        decrease: float = 0.5,
    ) -> None:
        if not 1 <= minimum <= maximum:
            raise ValueError(
                f"adaptive limits need 1 <= minimum <= maximum, got {minimum}, {maximum}"
            )
        if not 0.0 < decrease < 1.0:
            raise ValueError(f"decrease must be within (0, 1), got {decrease!r}")
        self.maximum = maximum
        self.minimum = minimum
        self.decrease = decrease
        self._value = float(initial if initial is not None else maximum)
        self._value = min(max(self._value, minimum), maximum)
        self.epoch = 0  # counts the cuts
        self.cuts = 0
        self._lock = threading.Lock()

    @property
    def limit(self) -> int:
        """The current limit on requests in flight."""
        return max(self.minimum, int(self._value))

    def on_success(self) -> None:
        """A request succeeded: grow the limit by ``1/limit`` (about one per full window)."""
        with self._lock:
            self._value = min(float(self.maximum), self._value + 1.0 / max(self._value, 1.0))

    def on_overload(self, started_epoch: int) -> None:
        """A request started in ``started_epoch`` was rate-limited: cut, once per epoch."""
        with self._lock:
            if started_epoch != self.epoch:
                return
            self._value = max(float(self.minimum), self._value * self.decrease)
            self.epoch += 1
            self.cuts += 1


class TransportLimits:
    """The limits of one backend: in flight, per minute, and adaptive. See the module doc.

    ``max_in_flight=None`` means no in-flight limit (unless ``adaptive``, which then starts
    from 32). ``rpm=None`` means no rate limit.
    """

    ADAPTIVE_DEFAULT_MAX = 32

    def __init__(
        self,
        *,
        max_in_flight: int | None = None,
        rpm: float | None = None,
        burst: int = 1,
        adaptive: bool = False,
        rate_period: float = 60.0,
    ) -> None:
        if max_in_flight is not None and (
            isinstance(max_in_flight, bool)
            or not isinstance(max_in_flight, int)
            or max_in_flight < 1
        ):
            raise ValueError(f"max_in_flight must be an int >= 1 or None, got {max_in_flight!r}")
        self.max_in_flight = max_in_flight
        self.rate = RateLimiter(rpm, per=rate_period, burst=burst) if rpm is not None else None
        self.adaptive: AdaptiveConcurrency | None = None
        if adaptive:
            self.adaptive = AdaptiveConcurrency(max_in_flight or self.ADAPTIVE_DEFAULT_MAX)
        self._gates: weakref.WeakKeyDictionary[Any, InFlightGate] = weakref.WeakKeyDictionary()
        self._gates_lock = threading.Lock()
        self._hold_until = -math.inf  # new starts wait until then (a server's Retry-After)

    def current_limit(self) -> int:
        """The in-flight limit in force now (adaptive, or fixed, or unbounded)."""
        if self.adaptive is not None:
            return self.adaptive.limit
        if self.max_in_flight is not None:
            return self.max_in_flight
        return 2**62

    def gate(self) -> InFlightGate:
        """The in-flight gate of the running event loop."""
        key = per_event_loop()
        with self._gates_lock:
            gate = self._gates.get(key)
            if gate is None:
                gate = self._gates[key] = InFlightGate(self.current_limit)
            return gate

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[int]:
        """Hold one request's place while it runs; yields the adaptive epoch it started in."""
        gate = self.gate() if self.max_in_flight is not None or self.adaptive else None
        if gate is not None:
            await gate.acquire()
        try:
            if self.rate is not None:
                await self.rate.wait()
            else:
                hold = self._hold_until - time.monotonic()
                if hold > 0:
                    await anyio.sleep(hold)
            yield self.adaptive.epoch if self.adaptive is not None else 0
        finally:
            if gate is not None:
                gate.release()

    def on_success(self) -> None:
        """Report a request that got an answer."""
        if self.adaptive is not None:
            self.adaptive.on_success()

    def on_rate_limited(self, started_epoch: int, retry_after: float | None) -> None:
        """Report a 429: cut the adaptive limit, and hold new starts for ``retry_after``."""
        if self.adaptive is not None:
            self.adaptive.on_overload(started_epoch)
        if retry_after and retry_after > 0:
            if self.rate is not None:
                self.rate.pause(retry_after)
            else:
                self._hold_until = max(self._hold_until, time.monotonic() + retry_after)
