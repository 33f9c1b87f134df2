"""When a call's subsamples start: the launch policies.

``launch="all"`` starts every subsample at once (no :class:`Launcher`: nothing waits).
The other policies start subsample 0 at once and make each later one wait for its turn in
its own task, so that a call decided meanwhile cancels the waiting subsamples as it cancels
the running ones (:mod:`sampling_core.engine.subsample_tasks`: cancellation stays in one
place), and they are counted as never started:

* ``staggered``: subsample ``i`` starts ``i * stagger_s`` seconds after the first;
* ``on_failure``: the next subsample starts each time a running one fails an attempt or
  ends, in any way (passed without deciding the call, ended by a backend error, refused its
  start because it could no longer win, cancelled while it waited): every subsample ends,
  so every one waiting gets its turn or is cancelled, and no call waits for ever.
"""

from __future__ import annotations

from typing import Literal

import anyio

__all__ = [
    "DEFAULT_STAGGER_S",
    "LAUNCH_POLICIES",
    "MAX_STAGGER_S",
    "Launch",
    "Launcher",
    "check_launch",
    "sleep",
]

Launch = Literal["all", "staggered", "on_failure"]
LAUNCH_POLICIES: tuple[str, ...] = ("all", "staggered", "on_failure")
DEFAULT_STAGGER_S = 1.0
"""Seconds between two subsamples' starts under ``launch="staggered"``, unless given."""
MAX_STAGGER_S = 3600.0
"""The longest stagger accepted: an hour between two starts (a longer one would leave a
call waiting, in effect forever, for subsamples it may need)."""

sleep = anyio.sleep
"""How a staggered subsample waits for its turn: the launcher's clock (a test may put a
fake one here)."""


def check_launch(launch: object, stagger_s: object) -> float:
    """Validate a launch policy and its stagger; the stagger in seconds (``ValueError``)."""
    if launch not in LAUNCH_POLICIES:
        raise ValueError(
            f"launch must be one of {', '.join(map(repr, LAUNCH_POLICIES))}, not {launch!r}"
        )
    if (
        isinstance(stagger_s, bool)
        or not isinstance(stagger_s, int | float)
        or not 0 <= stagger_s <= MAX_STAGGER_S
    ):
        raise ValueError(
            f"stagger_s must be a number of seconds from 0 to {MAX_STAGGER_S:g}, not {stagger_s!r}"
        )
    return float(stagger_s)


class Launcher:
    """Gives each subsample after the first its turn to start, by a launch policy."""

    __slots__ = ("_next", "_policy", "_stagger_s", "_turns")

    def __init__(self, policy: Launch, stagger_s: float, count: int) -> None:
        self._policy = policy
        self._stagger_s = stagger_s
        self._turns = [anyio.Event() for _ in range(count)] if policy == "on_failure" else []
        self._next = 1

    async def turn(self, index: int) -> None:
        """Wait until subsample ``index`` may start (``index`` 0 starts at once)."""
        if index == 0:
            return
        if self._policy == "staggered":
            await sleep(index * self._stagger_s)
        else:
            await self._turns[index].wait()

    def attempt_ended(self) -> None:
        """A subsample failed an attempt and goes on, or ended (however it ended): under
        ``on_failure`` the next subsample may start."""
        if self._next < len(self._turns):
            self._turns[self._next].set()
            self._next += 1
