"""The ``progress`` plugin: a rich progress display for long runs.

Two bars on stderr:

* **attempts** — completed attempts (and attempts ended by a backend error) over the
  attempts the running calls may make (``loop_budget * concurrency_budget`` each). When a
  call ends early, its unused budget is taken off the total, so the bar reaches its end.
* **calls** — finished ``sample()`` calls, with how many succeeded. Its total is ``total``
  when given (a batch of N prompts: ``ProgressPlugin(total=N)``), otherwise the calls
  started so far.

It is silent when stderr is not a terminal (CI logs, pipes): then no display is created
and every hook returns at once. Without ``total``, the display starts with the first call
and stops when no call is running; with ``total`` it stops after the N-th call, or use
the plugin as a context manager (``with ProgressPlugin(total=N) as bar: ...``).
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from hook_specs import (
    GenerationErrorPayload,
    SamplingIterationPayload,
    SamplingLoopEndPayload,
    SamplingLoopStartPayload,
    hookimpl,
)

__all__ = ["ProgressPlugin"]


class ProgressPlugin:
    """Shows attempts and calls as rich progress bars while sampling runs.

    ``total``: the number of calls expected (a batch), or ``None``. ``console``: where to
    draw (default: a rich ``Console`` on stderr); when it is not a terminal the plugin
    does nothing. ``description`` labels the calls bar.
    """

    affects_results = False  # an observer: may be added, removed or reconfigured on --resume

    def __init__(
        self,
        total: int | None = None,
        *,
        console: Console | None = None,
        description: str = "calls",
        refresh_per_second: float = 4.0,
    ) -> None:
        if total is not None and total < 0:
            raise ValueError(f"ProgressPlugin(total={total}) must be >= 0")
        self.console = console if console is not None else Console(stderr=True)
        self.enabled = self.console.is_terminal
        self.total = total
        self.description = description
        self.refresh_per_second = refresh_per_second
        self.calls_started = 0
        self.calls_done = 0
        self.calls_succeeded = 0
        self.attempts_done = 0
        self._planned = 0
        self._per_call: dict[str, list[int]] = {}  # sampling_id -> [planned, done]
        self._lock = threading.RLock()
        self._progress: Progress | None = None
        self._attempts_task: TaskID | None = None
        self._calls_task: TaskID | None = None

    # -- display ------------------------------------------------------------------------

    def start(self) -> None:
        """Show the display now (it also starts by itself with the first call)."""
        if not self.enabled:
            return
        with self._lock:
            if self._progress is not None:
                return
            progress = Progress(
                TextColumn("[progress.description]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.console,
                refresh_per_second=self.refresh_per_second,
                transient=False,
            )
            self._attempts_task = progress.add_task(
                "attempts", total=self._planned, completed=self.attempts_done
            )
            self._calls_task = progress.add_task(
                self._calls_description(),
                total=self.total if self.total is not None else self.calls_started,
                completed=self.calls_done,
            )
            progress.start()
            self._progress = progress

    def for_run(self, events_file: Any = None, total: int = 0) -> None:
        """Configure for a batch run: one bar over its ``total`` prompts."""
        if total < 0:
            raise ValueError(f"total={total} must be >= 0")
        self.total = total

    def close(self) -> None:
        """Stop the display (what a batch run calls when it ends)."""
        self.stop()

    def stop(self) -> None:
        """Draw the final state and remove the live display."""
        with self._lock:
            progress, self._progress = self._progress, None
        if progress is not None:
            progress.stop()

    def __enter__(self) -> ProgressPlugin:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _calls_description(self) -> str:
        return f"{self.description} ({self.calls_succeeded} ok)"

    def _update(self) -> None:
        progress = self._progress
        if progress is None:
            return
        if self._attempts_task is not None:
            progress.update(self._attempts_task, total=self._planned, completed=self.attempts_done)
        if self._calls_task is not None:
            progress.update(
                self._calls_task,
                description=self._calls_description(),
                total=self.total if self.total is not None else self.calls_started,
                completed=self.calls_done,
            )

    # -- hooks ----------------------------------------------------------------------------

    @hookimpl(trylast=True)
    def sampling_loop_start(self, payload: SamplingLoopStartPayload) -> None:
        """Add the call's budget to the attempts bar (after other plugins changed it)."""
        if not self.enabled:
            return
        planned = _budget(payload.loop_budget) * _budget(payload.concurrency_budget)
        with self._lock:
            self.calls_started += 1
            self._planned += planned
            self._per_call[payload.sampling_id] = [planned, 0]
            if self._progress is None:
                self.start()
            self._update()

    @hookimpl
    def sampling_iteration(self, payload: SamplingIterationPayload) -> None:
        """Advance the attempts bar."""
        if self.enabled:
            self._attempt_done(payload.sampling_id)

    @hookimpl
    def generation_error(self, payload: GenerationErrorPayload) -> None:
        """Advance the attempts bar for an attempt ended by a backend error."""
        if self.enabled and not payload.will_retry:
            self._attempt_done(payload.sampling_id)

    @hookimpl
    def sampling_loop_end(self, payload: SamplingLoopEndPayload) -> None:
        """Advance the calls bar; take the call's unused budget off the attempts bar."""
        if not self.enabled:
            return
        with self._lock:
            planned, done = self._per_call.pop(payload.sampling_id, [0, 0])
            self._planned -= max(planned - done, 0)
            self.calls_done += 1
            if payload.success:
                self.calls_succeeded += 1
            self._update()
            finished = (
                self.calls_done >= self.total if self.total is not None else not self._per_call
            )
        if finished:
            self.stop()

    def _attempt_done(self, sampling_id: str) -> None:
        with self._lock:
            self.attempts_done += 1
            counts = self._per_call.get(sampling_id)
            if counts is not None:
                counts[1] += 1
            self._update()


def _budget(value: Any) -> int:
    return value if isinstance(value, int) and value > 0 else 1
