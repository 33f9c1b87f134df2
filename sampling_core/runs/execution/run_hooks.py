"""The run hooks of one session: ``run_start``, ``prompt_start``, ``prompt_end``, ``run_end``.

A batch run fires them in the process that writes the run directory (the driver, under
Ray), through the hook table of the plugins the run names, with the same delivery as every
other hook (:class:`~sampling_core.hooks.channel.HookChannel`: no payload when nothing
implements or monitors a hook, faults isolated and logged, ``@background`` observers queued).

``prompt_end`` is fired once a prompt's record is in ``records.jsonl``: the records the
writer keeps in memory (``run.flush_every`` > 1) are announced when they are flushed, in
the order they were written, so a plugin that reads the file finds the line there. A prompt
that started and has no record in the file when the session ends (Ctrl-C, SIGTERM, a fatal
error) gets its ``prompt_end`` then, before ``run_end``, with a record that says so
(:func:`interrupted_record`): every ``prompt_start`` has one ``prompt_end``.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import structlog

from hook_specs.names import HookName
from sampling_core.errors import exception_text
from sampling_core.hooks.channel import HookChannel
from sampling_core.hooks.table import HookTable
from sampling_core.runs.config.dataset import PromptItem
from sampling_core.runs.reports.run_reading import RunReading
from sampling_core.runs.store.store import RunDirectory

__all__ = ["INTERRUPTED", "RunHooks", "interrupted_record"]

INTERRUPTED = "interrupted"
"""The ``status`` of the record a ``prompt_end`` carries for a prompt the session ended
first (it is written nowhere: the prompt runs again on ``--resume``)."""


def interrupted_record(key: str) -> dict[str, Any]:
    """The record ``prompt_end`` carries for prompt ``key`` when the session ended first."""
    return {
        "key": key,
        "status": INTERRUPTED,
        "reason": "the session ended before this prompt did (nothing was written; "
        "it runs again on --resume)",
    }


H = HookName
logger = structlog.get_logger("samplehooks.runs")


class RunHooks:
    """Fires one session's run hooks through ``table`` (``None``: no plugin, nothing fires)."""

    def __init__(
        self,
        table: HookTable | None,
        run_dir: Path,
        session: int,
        run_id: str | None = None,
        reading: RunReading | None = None,
    ) -> None:
        self.channel = HookChannel(table) if table is not None else None
        self.run_dir = os.path.abspath(run_dir)
        # the run read once at its end (the runner's, which it reads its summary from too)
        self.reading = reading or RunReading(RunDirectory(Path(run_dir)))
        self.session = session
        self.run_id = run_id
        self.started: float | None = None  # when run_start fired
        self._written: list[dict[str, Any]] = []  # records handed to the writer
        self._ready: deque[list[dict[str, Any]]] = deque()  # ...and in the file since
        self._open: dict[str, None] = {}  # prompts started and not ended, in start order
        self._announcing = anyio.Lock()

    def fires(self, hook: HookName) -> bool:
        """Whether ``hook`` does anything when fired (some plugin implements or monitors it)."""
        return self.channel is not None and getattr(self.channel.firing, hook.value)

    def _fields(self, **fields: Any) -> dict[str, Any]:
        return {"run_dir": self.run_dir, "run_id": self.run_id, "session": self.session, **fields}

    async def run_start(
        self,
        *,
        resumed: bool,
        executor: str,
        total: int,
        done: int,
        settings: Mapping[str, Any],
        config: Mapping[str, Any],
    ) -> None:
        """Fire ``run_start``; from now on :meth:`run_end` fires on every way out."""
        self.started = time.perf_counter()
        if self.channel is not None and self.fires(H.RUN_START):
            fields = self._fields(
                resumed=resumed,
                executor=executor,
                total=total,
                done=done,
                settings=dict(settings),
                config=dict(config),
            )
            await self.channel.fire(H.RUN_START, fields)

    async def prompt_start(self, item: PromptItem) -> None:
        """Fire ``prompt_start`` for a prompt about to be sampled."""
        if self.fires(H.PROMPT_END):  # it gets one, record or not
            self._open[item.key] = None
        if self.channel is not None and self.fires(H.PROMPT_START):
            fields = self._fields(key=item.key, row=dict(item.row or {}))
            await self.channel.fire(H.PROMPT_START, fields)

    def written(self, record: dict[str, Any]) -> None:
        """Note a record handed to the writer (as written); :meth:`announce` it once it is
        in the file."""
        if self.fires(H.PROMPT_END):
            self._written.append(record)

    async def announce(self) -> None:
        """Fire ``prompt_end`` for every noted record, in the order written. Call it right
        after the writer flushed (nothing awaited in between): the records noted so far
        are in the file then.

        Shielded: a record taken off the list is announced even if the session is being
        cancelled meanwhile (each prompt gets its ``prompt_end`` exactly once)."""
        if self._written:  # in the file now (records noted later may not be)
            self._ready.append(self._written)
            self._written = []
        if not self._ready or self.channel is None:
            return
        with anyio.CancelScope(shield=True):
            async with self._announcing:  # whoever holds it announces every ready batch
                while self._ready:
                    for record in self._ready.popleft():
                        await self._prompt_end(record)

    async def _end_interrupted(self) -> None:
        """Fire ``prompt_end`` for every prompt started and not ended (the session ends
        first), with :func:`interrupted_record`; shielded as :meth:`announce` is."""
        if not self._open or self.channel is None:
            return
        with anyio.CancelScope(shield=True):
            async with self._announcing:
                while self._open:
                    await self._prompt_end(interrupted_record(next(iter(self._open))))

    async def _prompt_end(self, record: dict[str, Any]) -> None:
        """Fire ``prompt_end`` for ``record``'s prompt, which is no longer in flight."""
        assert self.channel is not None
        key = str(record.get("key"))
        self._open.pop(key, None)
        status = str(record.get("status"))
        await self.channel.fire(H.PROMPT_END, self._fields(key=key, record=record, status=status))

    async def run_end(self, error: BaseException | None) -> None:
        """Fire ``run_end`` (when :meth:`run_start` fired): the run's report as it stands
        and its rows, from the run read once (:attr:`reading`; empty totals, and a warning,
        when the run directory cannot be read), ``interrupted`` when ``error`` ended the
        session. The prompts still in flight get their ``prompt_end`` first."""
        await self._end_interrupted()
        if self.started is None or self.channel is None or not self.fires(H.RUN_END):
            return
        rows: Any = ()
        try:
            made = self.reading.report()
            report, text, rows = made.as_dict(), made.render(), self.reading.rows()
        except Exception as exc:  # the session's own way out must not be lost to this
            logger.warning("run.report_unreadable", run_dir=self.run_dir, error=_text(exc))
            empty = {"totals": {}, "pass_at_k": None, "pass_hat_k": None, "maj_at_k": None}
            report, text = empty, ""
        report.pop("prompts", None)
        fields = self._fields(
            totals=report["totals"],
            pass_at_k=report["pass_at_k"],
            pass_hat_k=report["pass_hat_k"],
            maj_at_k=report["maj_at_k"],
            report=report,
            report_text=text,
            rows=rows,
            interrupted=error is not None,
            error=_fatal_text(error),
            elapsed_s=round(time.perf_counter() - self.started, 3),
        )
        await self.channel.fire(H.RUN_END, fields)


def _fatal_text(error: BaseException | None) -> str | None:
    """What a fault that ended the session says (``None`` for Ctrl-C, SIGTERM or a
    cancellation, which are not faults); a group of one is told by its one error."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    if not isinstance(error, Exception):
        return None
    return _text(error)


def _text(error: BaseException) -> str:
    return f"{type(error).__name__}: {exception_text(error)}"
