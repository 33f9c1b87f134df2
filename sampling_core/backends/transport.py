"""Transient backend failures and the retries that absorb them.

A backend raises :class:`TransientBackendError` (or a subclass) for failures worth retrying:
rate limits, server errors, timeouts, dropped connections. The engine retries those with
jittered exponential backoff that honours ``retry_after``, under the :class:`RetryPolicy`'s
own budget; transport retries never consume ``loop_budget``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

MAX_WAIT_S = 3600.0
"""The longest wait between two tries a policy may set (an hour): a longer one (``1e308``)
would hold its call, in effect forever, on the first transient failure."""


class TransientBackendError(Exception):
    """A backend failure that may succeed if tried again.

    ``retry_after`` is the server's requested wait in seconds (``Retry-After``), if any;
    ``status`` the HTTP status, if any.
    """

    def __init__(
        self, message: str, *, retry_after: float | None = None, status: int | None = None
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How transient failures are retried: at most ``max_retries`` times per backend call.

    The n-th retry waits ``min(max_delay, base_delay * 2**(n-1))`` scaled by a random factor
    in ``[1 - jitter, 1]``, or the server's ``retry_after`` when that is longer (capped at
    ``max_retry_after``).
    """

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 20.0
    jitter: float = 0.5
    max_retry_after: float = 120.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"RetryPolicy.max_retries must be >= 0, got {self.max_retries}")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"RetryPolicy.jitter must be within [0, 1], got {self.jitter}")
        for name in ("base_delay", "max_delay", "max_retry_after"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not (math.isfinite(value) and 0 <= value <= MAX_WAIT_S)
            ):
                raise ValueError(
                    f"RetryPolicy.{name} must be a number of seconds from 0 to "
                    f"{MAX_WAIT_S:g}, got {value!r}"
                )

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before the ``retry``-th retry (1-based)."""
        backoff = min(self.max_delay, self.base_delay * (2 ** (retry - 1)))
        backoff *= 1.0 - self.jitter * random.random()
        if retry_after is not None:
            backoff = max(backoff, min(float(retry_after), self.max_retry_after))
        return backoff


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is worth retrying at the transport level."""
    return isinstance(exc, TransientBackendError | TimeoutError)
