"""The batch progress bar on stderr: one bar over the run's prompts, with ok/failed/error."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["ProgressDisplay"]


class ProgressDisplay:
    """A rich progress bar over a run's prompts; silent unless asked for or on a terminal.

    ``mode`` is ``"on"``, ``"off"`` or ``"auto"`` (on when stderr is a terminal).
    ``console`` is a ``rich.console.Console`` to draw on (default: one on stderr).
    """

    def __init__(self, mode: str, *, total: int, console: Any = None) -> None:
        self.total = total
        self.enabled = mode == "on" or (mode == "auto" and sys.stderr.isatty())
        self._console = console
        self._progress: Any = None
        self._task: Any = None

    def start(self, counts: dict[str, int]) -> None:
        """Show the bar, starting from the prompts already done."""
        if not self.enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]sampling"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=self._console or Console(stderr=True),
        )
        self._progress.start()
        self._task = self._progress.add_task(
            "run", total=self.total, completed=sum(counts.values()), counts=_text(counts)
        )

    def advance(self, counts: dict[str, int]) -> None:
        """Move the bar to the current counts."""
        if self._progress is not None:
            self._progress.update(self._task, completed=sum(counts.values()), counts=_text(counts))

    def stop(self) -> None:
        """Remove the live display."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def _text(counts: dict[str, int]) -> str:
    ok, failed, error = (counts.get(k, 0) for k in ("ok", "failed", "error"))
    return f"ok {ok} · failed {failed} · error {error}"
