"""The batch runner: every prompt of a dataset through one ``Sampler``, into a run directory.

``run_batch`` checks everything it can before it writes anything (config, dataset,
plugins, and on resume the run directory, the config comparison and dataset drift); then
it starts or continues the run: up to ``run.max_concurrent_prompts`` prompts at once, one
``Sampler.sample()`` call each, one record appended per finished prompt.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import structlog

from sampling_core.plugins import PluginRegistry, PluginSettings, PluginSpec
from sampling_core.results import SamplingResult
from sampling_core.runs.components import (
    build_backend,
    build_requirements,
    build_sampler,
    build_strategy,
    close_plugins,
    plugin_specs,
    prompt_seed,
)
from sampling_core.runs.config import RunConfig
from sampling_core.runs.dataset import Dataset, PromptItem, read_dataset
from sampling_core.runs.errors import ConfigError, RunDirError
from sampling_core.runs.loading import load_config
from sampling_core.runs.progress import ProgressDisplay
from sampling_core.runs.resume import (
    check_dataset,
    compare_configs,
    lineage_note,
    provenance_header,
    read_effective_config,
    refuse,
    render_effective_config,
)
from sampling_core.runs.store import FORMAT, RecordsScan, RunDirectory, utc_now
from sampling_core.runs.summary import RunSummary, summarize

__all__ = ["run_batch", "run_batch_sync"]

logger = structlog.get_logger("samplehooks.runs")
Log = Callable[[str], None]


def _version() -> str:
    try:
        return metadata.version("samplehooks")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


async def run_batch(
    config: RunConfig | str | Path,
    out_dir: str | Path,
    *,
    resume: bool = False,
    retry_failed: bool = False,
    backend: Any = None,
    plugins: Iterable[PluginSpec] = (),
    argv: Sequence[str] | None = None,
    log: Log | None = None,
) -> RunSummary:
    """Sample every prompt of the config's dataset into the run directory ``out_dir``.

    ``config`` is a :class:`RunConfig` or the path of a YAML config. With ``resume``, the
    run in ``out_dir`` is continued: finished prompts are skipped (with ``retry_failed``,
    failed and errored ones run again). ``backend`` replaces the configured backend object
    (the config's ``backend`` block is still recorded and compared); ``plugins`` are added to
    the configured ones. ``argv`` is recorded in the provenance header; ``log`` receives
    the runner's messages (default: structlog).

    Raises :class:`~sampling_core.runs.errors.RunError` (a refused resume is
    :class:`~sampling_core.runs.errors.ResumeRefused`) before anything is written.
    Returns the run's summary.
    """
    say = log or (lambda message: logger.info("run.message", message=message))
    source: Path | None = None
    if not isinstance(config, RunConfig):
        source = Path(config)
        config = load_config(source)
    argv = list(argv) if argv is not None else ["(Python API)", "run_batch"]
    run_dir = RunDirectory(Path(out_dir))
    if resume:
        run_dir.check_is_run()
    elif not run_dir.is_empty_or_missing():
        raise RunDirError(
            f"{run_dir.path} already holds files; to continue the run there add --resume, "
            "or give another --out directory (nothing was written)"
        )
    dataset = read_dataset(config.dataset)
    extra_plugins = list(plugins)
    _check_plugin_names(config.plugins)
    own_backend = backend is None
    chosen_backend = build_backend(config) if own_backend else backend
    if resume:
        scan = _prepare_resume(run_dir, config, dataset, argv, retry_failed, say)
    else:
        _create(run_dir, config, dataset, argv, source)
        scan = RecordsScan([], 0)
        say(f"started run {run_dir.path}: {len(dataset.items)} prompts")
    sampler = None
    try:
        batch = _Batch(config, dataset, run_dir, scan, retry_failed, argv)
        sampler = build_sampler(
            chosen_backend,
            config.plugins,
            run_dir.events_file,
            extra_plugins,
            total=len(batch.pending),
        )
        await batch.run(sampler)
    finally:
        if sampler is not None:
            close_plugins(sampler)
        run_dir.unlock()
        if own_backend:
            await _close(chosen_backend)
    return summarize(run_dir.path)


def run_batch_sync(
    config: RunConfig | str | Path, out_dir: str | Path, **kwargs: Any
) -> RunSummary:
    """:func:`run_batch` from synchronous code."""
    return anyio.run(partial(run_batch, config, out_dir, **kwargs))


def _check_plugin_names(names: Sequence[str]) -> None:
    """Resolve each configured plugin name once, before anything is written."""
    registry = PluginRegistry(settings=PluginSettings.from_env())
    for spec in plugin_specs(names, Path("events.jsonl")):
        if isinstance(spec, str):
            try:
                registry.add(spec)
            except Exception as exc:
                raise ConfigError(f"plugins: {exc}") from exc


def _create(
    run_dir: RunDirectory,
    config: RunConfig,
    dataset: Dataset,
    argv: Sequence[str],
    source: Path | None,
) -> None:
    header = provenance_header(_version(), argv, source)
    meta = {
        "format": FORMAT,
        "samplehooks_version": _version(),
        "created": utc_now(),
        "dataset": {
            "path": str(dataset.path),
            "count": len(dataset.items),
            "fingerprint": dataset.fingerprint,
            "hashes": dataset.hashes(),
        },
    }
    run_dir.create(render_effective_config(config, header), meta)
    run_dir.lock()


def _prepare_resume(
    run_dir: RunDirectory,
    config: RunConfig,
    dataset: Dataset,
    argv: Sequence[str],
    retry_failed: bool,
    say: Log,
) -> RecordsScan:
    """Check the resume (reading only), then drop a torn tail and add the lineage note."""
    run_dir.lock()
    try:
        header, old = read_effective_config(run_dir)
        meta = run_dir.read_meta()
        scan = run_dir.scan_records()
        differences = compare_configs(old, config)
        blocking = [d for d in differences if d.label == "result"]
        if blocking:
            raise refuse(run_dir.path, blocking, drift=False)
        drift = check_dataset(meta, dataset, scan)
        if drift:
            raise refuse(run_dir.path, drift, drift=True)
    except BaseException:
        run_dir.unlock()
        raise
    if scan.torn:
        say(
            f"records.jsonl ended in a torn line ({len(scan.torn)} bytes, cut off when the run "
            "was killed); it was dropped and that prompt will run again"
        )
        run_dir.drop_torn_tail(scan)
    changes = [d for d in differences if d.label == "throughput"]
    note = lineage_note(changes, argv, " (--retry-failed)" if retry_failed else "")
    run_dir.write_config(render_effective_config(config, [*header, note]))
    latest = scan.latest()
    again = sum(1 for r in latest.values() if r["status"] != "ok") if retry_failed else 0
    to_run = len(dataset.items) - len(latest) + again
    shown = "; ".join(str(c) for c in changes) if changes else "no throughput change"
    say(
        f"resuming run {run_dir.path}: {len(latest)} of {len(dataset.items)} prompts done, "
        f"{to_run} to run ({shown})"
    )
    return scan


async def _close(backend: Any) -> None:
    close = getattr(backend, "aclose", None)
    if close is not None:
        with anyio.CancelScope(shield=True):
            await close()


class _Batch:
    """One session of a run: the prompts still to do, the writer, the counts."""

    def __init__(
        self,
        config: RunConfig,
        dataset: Dataset,
        run_dir: RunDirectory,
        scan: RecordsScan,
        retry_failed: bool,
        argv: Sequence[str],
    ) -> None:
        self.config = config
        self.run_dir = run_dir
        self.total = len(dataset.items)
        self.status = {key: r["status"] for key, r in scan.latest().items()}
        finished = {k for k, s in self.status.items() if s == "ok" or not retry_failed}
        self.pending = [item for item in dataset.items if item.key not in finished]
        self.seq = scan.last_seq
        self.requirements = build_requirements(config.requirements)
        self.strategy = build_strategy(config.strategy)
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
        mode = "off" if "progress" in config.plugins else config.run.progress
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
            self.status[item.key] = record["status"]
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
            result = await sampler.sample(
                item.prompt,
                requirements=[*self.requirements, *build_requirements(item.requirements)],
                strategy=self.strategy,
                loop_budget=self.config.budgets.loop_budget,
                concurrency_budget=self.config.budgets.concurrency_budget,
                seed=prompt_seed(self.config.seed, item.key),
                selection=self.config.selection,
                options=self.options,
            )
        except Exception as exc:
            record.update(
                status="error",
                reason=f"{type(exc).__name__}: {exc}",
                text=None,
                attempts={"used": 0, "cancelled": 0, "passing": 0, "stop_reason": "error"},
                usage={"input_tokens": 0, "output_tokens": 0},
            )
        else:
            record.update(_outcome(result))
        record["timings"] = {
            "started": started_at,
            "elapsed_s": round(time.perf_counter() - t0, 4),
        }
        return record

    def _counts(self) -> dict[str, int]:
        counts = {"ok": 0, "failed": 0, "error": 0}
        for status in self.status.values():
            counts[status] = counts.get(status, 0) + 1
        return counts

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
    if result.success:
        status, reason = "ok", None
    elif result.stop_reason == "error" or (not result.attempts and result.errors):
        status = "error"
        reason = str(result.errors[0]) if result.errors else "the sampling call ended in error"
    else:
        status = "failed"
        reasons = result.picked.failure_reasons if result.picked is not None else []
        reason = "; ".join(reasons) or f"stopped: {result.stop_reason}"
        if result.stop_reason == "stopped_by_plugin":
            reason = f"stopped by a plugin; {reason}"
    return {
        "status": status,
        "reason": reason,
        "text": result.text,
        "attempts": {
            "used": result.iterations_used,
            "cancelled": result.cancelled,
            "passing": sum(1 for a in result.attempts if a.passed),
            "stop_reason": result.stop_reason,
            "each": [
                {
                    "subsample": a.subsample_index,
                    "attempt": a.attempt,
                    "passed": a.passed,
                    "latency_s": round(a.latency_s, 4),
                    **({"failed": a.failure_reasons} if not a.passed else {}),
                }
                for a in result.attempts
            ],
        },
        "usage": {
            "input_tokens": result.usage.input_tokens,
            "output_tokens": result.usage.output_tokens,
        },
    }


def default_log(message: str) -> None:
    """Print a runner message on stderr (what the CLI uses)."""
    print(f"samplehooks: {message}", file=sys.stderr)
