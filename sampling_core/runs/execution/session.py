"""One session of a batch run: the prompts still to do, and the records, progress and display.

A :class:`BatchSession` is the run directory's only writer, and fires the run hooks
(:class:`~sampling_core.runs.execution.run_hooks.RunHooks`). An executor takes prompts from
:attr:`BatchSession.pending`, announces each with :meth:`BatchSession.start` before it is
sampled and hands each finished record to :meth:`BatchSession.finish`: :func:`run_locally`
samples them in this process; the Ray executor (:mod:`sampling_core.runs.execution.ray_executor`) on
a
cluster's workers.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import anyio

from sampling_core.hooks.table import HookTable
from sampling_core.redaction import shown_data
from sampling_core.runs.config.components import Components
from sampling_core.runs.config.config import RunConfig
from sampling_core.runs.config.dataset import Dataset, PromptItem
from sampling_core.runs.execution.progress import ProgressDisplay
from sampling_core.runs.execution.prompt_run import run_prompt
from sampling_core.runs.execution.run_hooks import RunHooks
from sampling_core.runs.reports.run_reading import RunReading
from sampling_core.runs.store.index import RunIndex
from sampling_core.runs.store.record import read_record
from sampling_core.runs.store.store import RunDirectory, utc_now

__all__ = ["BatchSession", "Executor", "run_locally"]


class BatchSession:
    """One session of a run: the prompts still to do, the records writer, the counts.

    The dataset is read as the prompts are taken, and the counts are kept as the records
    come in: on a resume, which prompts are done is asked of the run's index (on disk:
    :class:`~sampling_core.runs.store.index.RunIndex`), so memory holds neither the dataset nor
    the records. The index counts the latest record of each of the run's prompts that has
    one (a resume over records that are not the run's is refused before: see
    :func:`~sampling_core.runs.resume.integrity.foreign_records`).
    """

    def __init__(
        self,
        config: RunConfig,
        dataset: Dataset,
        run_dir: RunDirectory,
        index: RunIndex | None,
        retry_failed: bool,
        argv: Sequence[str],
        began: float | None = None,
    ) -> None:
        """``began``: when the session began (``perf_counter()``), if before this: its
        executor's start (a Ray cluster and its workers' backends) is the session's time."""
        self.config = config
        self.run_dir = run_dir
        self.total = dataset.count
        self._index = index
        self.counts: Counter[str] = Counter({"ok": 0, "failed": 0, "error": 0})
        if index is not None:
            self.counts.update(dict(index.query(_STATUS_COUNTS)))
        finished = self.counts["ok"] if retry_failed else sum(self.counts.values())
        self.pending_count = self.total - finished
        self.pending: Iterator[PromptItem] = (
            self._pending(dataset, retry_failed) if self.pending_count > 0 else iter(())
        )
        self.seq = index.scan.last_seq if index is not None else 0
        if index is not None:  # what this session writes goes into the index too
            index.start_appending(run_dir.records_file.stat().st_size)
        progress = run_dir.read_progress()
        self.sessions: list[dict[str, Any]] = list(progress.get("sessions", []))
        self.session = {
            "started": utc_now(),
            "argv": list(argv),
            "elapsed_s": 0.0,
            "records": 0,
            "state": "running",
        }
        self.sessions.append(self.session)
        self.number = len(self.sessions)
        self.hooks = RunHooks(None, run_dir.path, self.number)
        self.run_id: str | None = None  # the run's identity in meta.json (set by the runner)
        self.started = time.perf_counter() if began is None else began
        self.writer = run_dir.open_writer(
            flush_every=config.run.flush_every, fsync=config.run.fsync
        )
        # the `progress` plugin, when configured here, draws the bar instead (on the Ray
        # executor it runs in the workers, so the driver draws its own)
        local = config.run.executor == "local"
        named = {entry.name for entry in config.plugins}
        mode = "off" if "progress" in named and local else config.run.progress
        self.display = ProgressDisplay(mode, total=self.total)

    async def run(
        self,
        execute: Executor,
        hooks: HookTable | None = None,
        settings: Mapping[str, Any] | None = None,
        reading: RunReading | None = None,
    ) -> None:
        """Fire ``run_start``, run ``execute(self)``, and on every way out flush, record
        progress and fire ``run_end``. ``hooks``: the table of the plugins the run names
        (their run hooks fire here); ``settings``: the result settings in ``meta.json``;
        ``reading``: where the run is read once at its end (``run_end`` reads it there)."""
        self.hooks = RunHooks(hooks, self.run_dir.path, self.number, self.run_id, reading)
        self.display.start(self._counts())
        ended: BaseException | None = None
        try:
            self._save_progress()
            await self.hooks.run_start(
                resumed=self.number > 1,
                executor=self.config.run.executor,
                total=self.total,
                done=self.total - self.pending_count,
                settings=settings or {},
                config=shown_data(self.config.model_dump(mode="json")),
            )
            async with anyio.create_task_group() as group:
                group.start_soon(self._flush_on_timer)
                await execute(self)
                group.cancel_scope.cancel()
            self.session["state"] = "finished"
        except BaseException as exc:
            self.session["state"] = "interrupted"
            ended = exc
            raise
        finally:
            try:
                self.writer.close()
                if reading is not None and self._index is not None:
                    reading.written_whole(self._index)  # every record is in the file
                await self.hooks.announce()  # the records flushed last
                self._save_progress()
                self.display.stop()
            finally:
                with anyio.CancelScope(shield=True):
                    await self.hooks.run_end(ended)

    async def start(self, item: PromptItem) -> None:
        """Announce a prompt about to be sampled (``prompt_start``)."""
        await self.hooks.prompt_start(item)

    async def finish(self, record: dict[str, Any]) -> None:
        """Number and append one prompt's record, and count it; ``prompt_end`` once the
        record is in the file."""
        read = read_record(record)  # as every reader reads it (a Ray worker's, too)
        if read is None:
            raise ValueError(f"not a record: {str(record)[:200]}")
        self.seq += 1
        record["seq"] = self.seq
        record["session"] = self.number
        written, size = self.writer.append_sized(record)
        self.hooks.written(written)
        if self._index is not None:
            self._index.append(read_record(written) or read, size)
        previous = self._status(read.key)
        if previous is not None:  # a prompt run again (--retry-failed)
            self.counts[previous] -= 1
        self.counts[read.status] += 1
        self.session["records"] += 1
        self.display.advance(self._counts())
        if not self.writer.waiting:
            await self.hooks.announce()

    def _status(self, key: str) -> str | None:
        """The status of ``key``'s latest record before this session (``None``: none)."""
        if self._index is None:
            return None
        status = self._index.value(_STATUS_OF, (key,))
        return status if isinstance(status, str) else None

    def _pending(self, dataset: Dataset, retry_failed: bool) -> Iterator[PromptItem]:
        """The prompts still to do: those without a record, and with ``retry_failed`` those
        whose latest record is not ok (with ``retry``, how many records they have: they
        ask the backend again, with seeds of their own)."""
        for item in dataset:
            status = self._status(item.key)
            if status is None:
                yield item
            elif status != "ok" and retry_failed:
                assert self._index is not None  # a prompt has a status only in one
                yield replace(item, retry=int(self._index.value(_RECORDS_OF, (item.key,))))

    async def _flush_on_timer(self) -> None:
        interval = self.config.run.flush_interval_s
        while True:
            await anyio.sleep(interval)
            self.writer.flush()
            self._save_progress()
            await self.hooks.announce()

    def _counts(self) -> dict[str, int]:
        return dict(self.counts)

    def _save_progress(self) -> None:
        self.session["elapsed_s"] = round(time.perf_counter() - self.started, 3)
        self.session["updated"] = utc_now()
        counts = self._counts()
        done = sum(counts.values())
        self.run_dir.write_progress(
            {
                "state": "finished" if done >= self.total else self.session["state"],
                "total": self.total,
                "done": done,
                **counts,
                "pending": self.total - done,
                "updated": utc_now(),
                "sessions": self.sessions,
            }
        )


_STATUS_COUNTS = "SELECT status, COUNT(*) FROM latest JOIN rec USING (line) GROUP BY status"
_STATUS_OF = "SELECT status FROM latest JOIN rec USING (line) WHERE latest.key = ?"
_RECORDS_OF = "SELECT COUNT(*) FROM rec WHERE own = 1 AND key = ?"

Executor = Callable[[BatchSession], Awaitable[None]]
"""What samples a session's pending prompts, handing each record to ``session.finish``."""


def run_locally(parts: Components) -> Executor:
    """The local executor: ``run.max_concurrent_prompts`` prompts at once, in this process."""

    async def execute(session: BatchSession) -> None:
        async def worker() -> None:
            for item in session.pending:
                await session.start(item)
                await session.finish(await run_prompt(parts, item, session.number))

        width = min(parts.config.run.max_concurrent_prompts, max(session.pending_count, 1))
        async with anyio.create_task_group() as pool:
            for _ in range(width):
                pool.start_soon(worker)

    return execute
