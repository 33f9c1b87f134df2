"""How a drain of background events waits, and what a Ctrl-C does to the wait.

A drain looks again and again at how many events are left, pausing between looks (1 ms at
first, doubling to 50 ms; a producer waiting for room in a full queue does the same): a wait
on a lock's condition could be left with its lock broken by a Ctrl-C, and a wait in a worker
thread could outlive an interrupted event loop. After a Ctrl-C the drain goes on (a slow
observer still gets its events) and, once it has waited :data:`NOTICE_AFTER_S`, says what it
waits for; a second Ctrl-C hurries it (see
:meth:`~sampling_core.hooks.background.BackgroundDelivery.hurry`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["FIRST_PAUSE_S", "NOTICE_AFTER_S", "DrainWait", "longer"]

NOTICE_AFTER_S = 1.0
"""After a Ctrl-C, how long a drain waits before it says what it is waiting for."""

FIRST_PAUSE_S = 0.001
"""The first pause of a wait that looks again and again (a drain's, a full queue's)."""


def longer(pause: float) -> float:
    """The pause after ``pause``: twice as long, at most 50 ms."""
    return min(pause * 2, 0.05)


class DrainWait:
    """One drain's wait for the last event: its pauses, its notice, its interruptions (the
    first is kept and announced, the next one hurries the delivery)."""

    __slots__ = ("caught", "interrupted", "notice_at", "pause")

    def __init__(self, interrupted: bool) -> None:
        self.caught: BaseException | None = None  # the first interruption, raised at the end
        self.interrupted = interrupted
        self.notice_at = time.monotonic() + NOTICE_AFTER_S if interrupted else None
        self.pause = FIRST_PAUSE_S

    def next_pause(self, pending: int, notice: Callable[[], None]) -> float | None:
        """How long to pause before the next look, with ``pending`` events left; ``None``
        when none is. Calls ``notice`` once, when the wait after a Ctrl-C grows long."""
        if not pending:
            return None
        if self.notice_at is not None and time.monotonic() >= self.notice_at:
            self.notice_at = None
            notice()
        pause, self.pause = self.pause, longer(self.pause)
        return pause

    def interrupted_by(self, interruption: BaseException) -> bool:
        """Note an interruption; whether it is a second one (then the wait is hurried)."""
        if self.caught is None:
            self.caught = interruption
        if self.interrupted:
            return True
        self.interrupted = True
        self.notice_at = time.monotonic() + NOTICE_AFTER_S
        return False
