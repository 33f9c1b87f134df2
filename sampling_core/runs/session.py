"""One session of a batch run: workers sampling the pending prompts, records, progress."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import anyio

from sampling_core.kinds import KindRegistry
from sampling_core.results import SamplingResult
from sampling_core.runs.components import Components, build_requirements, prompt_seed
from sampling_core.runs.config import RunConfig
from sampling_core.runs.dataset import Dataset, PromptItem
from sampling_core.runs.integrity import run_records
from sampling_core.runs.outcome import attempt_entries, usage_entry
from sampling_core.runs.progress import ProgressDisplay
from sampling_core.runs.store import RecordsScan, RunDirectory, utc_now

__all__ = ["BatchSession"]


class BatchSession:
    """One session of a run: the prompts still to do, the records writer, the counts."""

    def __init__(
        self,
        config: RunConfig,
        dataset: Dataset,
        run_dir: RunDirectory,
        scan: RecordsScan,
        retry_failed: bool,
        argv: Sequence[str],
        components: Components,
        kinds: KindRegistry,
    ) -> None:
        self.config = config
        self.run_dir = run_dir
        self.total = len(dataset.items)
        self.status = {key: r["status"] for key, r in run_records(scan, dataset.hashes()).items()}
        # kept up to date record by record: counting every status anew for each record made
        # a run slower the further it went
        self.counts = {"ok": 0, "failed": 0, "error": 0}
        for status in self.status.values():
            self.counts[status] = self.counts.get(status, 0) + 1
        finished = {k for k, s in self.status.items() if s == "ok" or not retry_failed}
        self.pending = [item for item in dataset.items if item.key not in finished]
        self.seq = scan.last_seq
        self.kinds = kinds
        self.requirements = components.requirements
        self.strategy = components.strategy
        self.options = config.options.as_options()
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
        self.started = time.perf_counter()
        self.writer = run_dir.open_writer(
            flush_every=config.run.flush_every, fsync=config.run.fsync
        )
        # the `progress` plugin, when configured, draws the bar instead
        named = {entry.name for entry in config.plugins}
        mode = "off" if "progress" in named else config.run.progress
        self.display = ProgressDisplay(mode, total=self.total)

    async def run(self, sampler: Any) -> None:
        """Sample every pending prompt; flush and record progress on every way out."""
        items = iter(self.pending)
        workers = min(self.config.run.max_concurrent_prompts, max(len(self.pending), 1))
        self.display.start(self._counts())
        try:
            self._save_progress()
            async with anyio.create_task_group() as group:
                group.start_soon(self._flush_on_timer)
                async with anyio.create_task_group() as pool:
                    for _ in range(workers):
                        pool.start_soon(self._worker, sampler, items)
                group.cancel_scope.cancel()
            self.session["state"] = "finished"
        except BaseException:
            self.session["state"] = "interrupted"
            raise
        finally:
            self.writer.close()
            self._save_progress()
            self.display.stop()

    async def _worker(self, sampler: Any, items: Any) -> None:
        for item in items:
            record = await self._sample(sampler, item)
            self.seq += 1
            record["seq"] = self.seq
            self.writer.append(record)
            previous = self.status.get(item.key)
            if previous is not None:
                self.counts[previous] -= 1
            self.status[item.key] = record["status"]
            self.counts[record["status"]] = self.counts.get(record["status"], 0) + 1
            self.session["records"] += 1
            self.display.advance(self._counts())

    async def _flush_on_timer(self) -> None:
        interval = self.config.run.flush_interval_s
        while True:
            await anyio.sleep(interval)
            self.writer.flush()
            self._save_progress()

    async def _sample(self, sampler: Any, item: PromptItem) -> dict[str, Any]:
        started_at = utc_now()
        t0 = time.perf_counter()
        record: dict[str, Any] = {
            "seq": 0,
            "key": item.key,
            "line": item.line,
            "content_hash": item.content_hash,
            "session": len(self.sessions),
        }
        try:
            own = build_requirements(item.requirements, self.kinds) if item.requirements else []
            result = await sampler.sample(
                item.prompt,
                row=item.row,
                requirements=[*self.requirements, *own],
                strategy=self.strategy,
                loop_budget=self.config.budgets.loop_budget,
                concurrency_budget=self.config.budgets.concurrency_budget,
                seed=prompt_seed(self.config.seed, item.key),
                selection=self.config.selection,
                options=self.options,
                early_exit=self.config.budgets.early_exit,
            )
        except Exception as exc:
            record.update(
                status="error",
                reason=f"{type(exc).__name__}: {exc}",
                text=None,
                attempts={"used": 0, "cancelled": 0, "passing": 0, "stop_reason": "error"},
                usage={"input_tokens": 0, "output_tokens": 0, "cost_usd": None},
            )
        else:
            record.update(_outcome(result))
        record["timings"] = {
            "started": started_at,
            "elapsed_s": round(time.perf_counter() - t0, 4),
        }
        return record

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


def _outcome(result: SamplingResult) -> dict[str, Any]:
    """A record's status, reason, text, attempts summary and usage, from a result."""
    failed_checks: list[str] = []
    if result.success:
        status, reason = "ok", None
    elif result.stop_reason == "error" or (not result.attempts and result.errors):
        status = "error"
        reason = str(result.errors[0]) if result.errors else "the sampling call ended in error"
    else:
        status = "failed"
        reasons = result.picked.failure_reasons if result.picked is not None else []
        if result.picked is not None:
            failed_checks = [
                v.requirement or "a requirement" for v in result.picked.validations if not v.passed
            ]
        reason = "; ".join(reasons) or f"stopped: {result.stop_reason}"
        if result.stop_reason == "stopped_by_plugin":
            reason = f"stopped by a plugin; {reason}"
    return {
        "sampling_id": result.sampling_id,
        "status": status,
        "reason": reason,
        "failed_requirements": failed_checks,
        "text": result.text,
        "attempts": {
            "used": result.iterations_used,
            "cancelled": result.cancelled,
            "passing": sum(1 for a in result.attempts if a.passed),
            "stop_reason": result.stop_reason,
            "loop_budget": result.loop_budget,
            "concurrency_budget": result.concurrency_budget,
            "each": attempt_entries(result),
        },
        "usage": usage_entry(result),
    }
