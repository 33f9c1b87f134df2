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
from pathlib import Path
from typing import Any

import anyio
import structlog
from pydantic import ValidationError

from sampling_core.backends.base import aclose_backend
from sampling_core.errors import exception_text
from sampling_core.hooks.entry_points import PluginSettings, PluginSpec
from sampling_core.hooks.registry import PluginRegistry
from sampling_core.kinds import KindError, KindRegistry, collect_kinds
from sampling_core.redaction import shown
from sampling_core.runs.config.components import (
    build_backend,
    build_components,
    build_sampler,
    check_kinds,
    close_plugins,
    plugin_specs,
)
from sampling_core.runs.config.config import PluginEntry, RunConfig
from sampling_core.runs.config.dataset import Dataset, read_dataset
from sampling_core.runs.config.loading import describe_errors, load_config, refuse_unwritable
from sampling_core.runs.errors import ConfigError, RunDirError
from sampling_core.runs.execution.ray_executor import RayWorkers, with_executor
from sampling_core.runs.execution.run_cache import open_run_cache, with_cache
from sampling_core.runs.execution.session import BatchSession, run_locally
from sampling_core.runs.reports.run_reading import RunReading
from sampling_core.runs.reports.summary import RunSummary, summary_of
from sampling_core.runs.resume.integrity import (
    check_settings,
    foreign_records,
    recorded_settings,
    refuse_foreign,
    resolved_settings,
    run_identity,
    settings_meta,
)
from sampling_core.runs.resume.resume import (
    Difference,
    check_dataset,
    compare_configs,
    lineage_note,
    new_run_meta,
    provenance_header,
    read_effective_config,
    refuse,
    render_effective_config,
    samplehooks_version,
)
from sampling_core.runs.store.index import RunIndex
from sampling_core.runs.store.kept_texts import repair_texts
from sampling_core.runs.store.meta_hashes import read_run_meta
from sampling_core.runs.store.store import RunDirectory

__all__ = ["run_batch", "run_batch_sync"]

logger = structlog.get_logger("samplehooks.runs")
Log = Callable[[str], None]


async def run_batch(
    config: RunConfig | str | Path,
    out_dir: str | Path,
    *,
    resume: bool = False,
    retry_failed: bool = False,
    backend: Any = None,
    plugins: Iterable[PluginSpec] = (),
    plugin_options: Sequence[PluginEntry | str | dict[str, Any]] = (),
    kinds: KindRegistry | None = None,
    argv: Sequence[str] | None = None,
    log: Log | None = None,
    executor: str | None = None,
    ray_address: str | None = None,
    workers: int | None = None,
    cache: str | Path | None = None,
    with_index: Callable[[RunIndex], None] | None = None,
) -> RunSummary:
    """Sample every prompt of the config's dataset into the run directory ``out_dir``.

    ``config`` is a :class:`RunConfig` or the path of a YAML config. With ``resume``, the
    run in ``out_dir`` is continued: finished prompts are skipped (with ``retry_failed``,
    failed and errored ones run again). ``backend`` replaces the configured backend object
    (the config's ``backend`` block is still recorded and compared); ``plugins`` are added to
    the configured ones (objects: recorded by their class and compared on resume, as
    :func:`~sampling_core.runs.config.labelled.plugin_label` says). ``plugin_options`` are plugins
    by name
    (``--plugin``) added to the config's ``plugins:``, as ``SAMPLEHOOKS_PLUGINS`` names are;
    ``SAMPLEHOOKS_DISABLE_PLUGINS`` removes names. ``kinds`` replaces the kinds collected from
    the installed plugins. ``argv`` is recorded in the provenance header; ``log`` receives
    the runner's messages (default: structlog). ``executor``, ``ray_address`` and
    ``workers`` replace ``run.executor``, ``run.ray.address`` and ``run.ray.workers``;
    ``cache`` replaces ``run.cache`` (the response cache, a throughput setting).
    ``with_index`` is called with the run's index once the run has ended, the one the
    summary is then read from (``samplehooks run`` reads its report there: the records are
    read once for both).

    Raises :class:`~sampling_core.runs.errors.RunError` (a refused resume is
    :class:`~sampling_core.runs.errors.ResumeRefused`) before anything is written.
    Returns the run's summary.
    """
    say = log or (lambda message: logger.info("run.message", message=message))
    settings = PluginSettings.from_env()
    source: Path | None = None
    if not isinstance(config, RunConfig):
        source = Path(config)
        _refuse_unencodable(source, "the config path")
    where = f"{source}: " if source is not None else ""
    if kinds is None:
        try:
            kinds = collect_kinds(settings)
        except KindError as exc:
            raise ConfigError(f"{where}{exception_text(exc)}") from exc
    if source is not None:
        config = load_config(source, kinds=kinds)  # its kinds are checked as it is read
    else:
        check_kinds(config, kinds)
    _refuse_unencodable(Path(out_dir), "the run directory")
    _refuse_unencodable(config.dataset.path, "the dataset path")
    config = with_cache(with_executor(config, executor, ray_address, workers), cache)
    # recorded in the header and progress.json: shown, as every setting is (no credential)
    argv = [shown(a) for a in argv] if argv is not None else ["(Python API)", "run_batch"]
    run_dir = RunDirectory(Path(out_dir))
    if resume:
        run_dir.check_is_run()
    elif not run_dir.is_empty_or_missing():
        raise RunDirError(
            f"{run_dir.path} already holds files; to continue the run there add --resume, "
            "or give another --out directory (nothing was written)"
        )
    config = with_plugins(config, plugin_options, settings)
    refuse_unwritable(config, where)  # a lone surrogate: refused before anything is written
    dataset = read_dataset(config.dataset, kinds, config.requirements)
    extra_plugins = list(plugins)
    _check_plugin_names(config.plugins, source)
    cluster = None
    own_backend = backend is None
    chosen_backend = None
    responses = open_run_cache(config)  # a file that cannot be a cache: refused here
    began = time.perf_counter()  # the session's wall time includes starting its executor
    try:
        if config.run.executor == "ray":  # workers ready before anything is written
            probe = responses.new_probe() if responses is not None else None
            cluster = RayWorkers.start(config, kinds, backend, extra_plugins, probe)
            resolved = resolved_settings(backend) if not own_backend else cluster.resolved
        else:
            chosen_backend = build_backend(config, kinds) if own_backend else backend
            resolved = resolved_settings(chosen_backend)
    except BaseException:
        if responses is not None:
            responses.close()
        raise
    parts = None
    driver = None  # under Ray: the run's plugins in this process, for their run hooks
    index = None
    reading = RunReading(run_dir)  # the run read once at its end
    failed = interrupted = False
    try:
        if resume:
            index = _prepare_resume(
                run_dir, config, dataset, argv, retry_failed, say, resolved, kinds, extra_plugins
            )
            reading = RunReading(run_dir, index)  # it owns the index now, and closes it
        else:
            _create(run_dir, config, dataset, argv, source, resolved, kinds, extra_plugins)
            say(f"started run {run_dir.path}: {dataset.count} prompts")
        batch = BatchSession(config, dataset, run_dir, index, retry_failed, argv, began)
        meta = index.meta if index is not None else read_run_meta(run_dir, _no_hashes)
        settings, batch.run_id = recorded_settings(meta), run_identity(meta)
        if cluster is not None:
            # the workers fire the call hooks; this process, which writes the run directory,
            # fires the run hooks, with plugins made from the same config
            driver = build_sampler(
                None, config.plugins, run_dir.events_file, extra_plugins, batch.pending_count
            )
            await batch.run(cluster.execute, driver.plugins.hooks(), settings, reading)
        else:
            parts = build_components(
                config,
                kinds,
                run_dir.events_file,
                backend=chosen_backend,
                extra_plugins=extra_plugins,
                total=batch.pending_count,
                cache=responses,
            )
            await batch.run(run_locally(parts), parts.sampler.plugins.hooks(), settings, reading)
    except BaseException as exc:
        failed, interrupted = True, _is_interruption(exc)
        raise
    finally:
        late: BaseException | None = None  # a Ctrl-C while the end waited for observers
        for sampler in (parts.sampler if parts is not None else None, driver):
            if sampler is None:
                continue
            # every @background event before the end; after a Ctrl-C it says what it waits
            # for, and a second Ctrl-C stops the waiting for a stuck observer
            late = await sampler.background.adrain_at_end(interrupted or late is not None) or late
            close_plugins(sampler)
        if cluster is not None:  # before the lock goes: the workers' last events are written
            cluster.close(run_dir.events_file if run_dir.events_file.parent.is_dir() else None)
        run_dir.unlock()
        if cluster is None and own_backend and chosen_backend is not None:
            await aclose_backend(chosen_backend)
        if responses is not None:
            responses.close()
        if failed or late is not None:
            reading.close()
        if late is not None and not failed:
            raise late  # the run's work was done; its end was interrupted
    try:  # the run read once at its end: run_end's report, the summary, the caller's report
        end = reading.index()
        if with_index is not None:
            with_index(end)
        return summary_of(end)
    finally:
        reading.close()


def _is_interruption(exc: BaseException) -> bool:
    """Whether ``exc`` ends the run because it was interrupted: Ctrl-C (``KeyboardInterrupt``,
    which asyncio delivers as a cancellation) or a cancelled caller, alone or in a group."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_is_interruption(inner) for inner in exc.exceptions)
    return isinstance(exc, KeyboardInterrupt | anyio.get_cancelled_exc_class())


def run_batch_sync(
    config: RunConfig | str | Path, out_dir: str | Path, **kwargs: Any
) -> RunSummary:
    """:func:`run_batch` from synchronous code."""
    return anyio.run(partial(run_batch, config, out_dir, **kwargs))


def _refuse_unencodable(path: Path, what: str) -> None:
    """A path whose name is not UTF-8 cannot be recorded in the run's files: refuse it."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = str(path).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        raise ConfigError(
            f"{what} {shown} is not valid UTF-8; rename it (or use another path) and run again"
        ) from None


def with_plugins(
    config: RunConfig, added: Sequence[PluginEntry | str | dict[str, Any]], settings: PluginSettings
) -> RunConfig:
    """The config's plugins, plus ``added`` (``--plugin``) and ``SAMPLEHOOKS_PLUGINS``,
    minus the disabled; each checked by the config's own rule for a plugin entry (installed
    plugins only), so whatever a run samples with is recorded and compared on resume.

    A name given again replaces the earlier entry (so ``--plugin recorder:capture_content=1``
    reconfigures a configured recorder).
    """
    entries = {entry.name: entry for entry in config.plugins}
    more = [_entry(entry, "--plugin") for entry in added]
    more += [
        _entry(name, "SAMPLEHOOKS_PLUGINS")
        for name in sorted(settings.only or ())
        if name not in entries
    ]
    for entry in more:
        entries[entry.name] = entry
    kept = [entry for name, entry in entries.items() if name not in settings.disabled]
    if kept == list(config.plugins):
        return config
    return config.model_copy(update={"plugins": kept})


def _entry(given: PluginEntry | str | dict[str, Any], where: str) -> PluginEntry:
    """``given`` as a checked :class:`PluginEntry`; ConfigError naming ``where`` if not."""
    try:
        return PluginEntry.model_validate(given)
    except ValidationError as exc:
        problem = "; ".join(describe_errors(exc, PluginEntry))
        raise ConfigError(f"{where}: {problem} (nothing was written)") from None


def _check_plugin_names(names: Sequence[PluginEntry], source: Path | None) -> None:
    """Resolve each configured plugin name once, before anything is written."""
    registry = PluginRegistry(settings=PluginSettings.from_env())
    where = f"{source}: " if source is not None else ""
    try:
        for name, plugin in plugin_specs(names, Path("events.jsonl")):
            registry.add(plugin, name)
    except ConfigError as exc:
        raise ConfigError(f"{where}{exception_text(exc)}") from exc
    except Exception as exc:
        raise ConfigError(f"{where}plugins: {exception_text(exc)}") from exc


def _create(
    run_dir: RunDirectory,
    config: RunConfig,
    dataset: Dataset,
    argv: Sequence[str],
    source: Path | None,
    resolved: dict[str, Any],
    kinds: KindRegistry,
    objects: Sequence[PluginSpec],
) -> None:
    header = provenance_header(samplehooks_version(), argv, source)
    meta = new_run_meta(dataset, settings_meta(config, resolved, kinds, objects=objects))
    run_dir.create(render_effective_config(config, header), meta)
    run_dir.lock()


def _prepare_resume(
    run_dir: RunDirectory,
    config: RunConfig,
    dataset: Dataset,
    argv: Sequence[str],
    retry_failed: bool,
    say: Log,
    resolved: dict[str, Any],
    kinds: KindRegistry,
    objects: Sequence[PluginSpec],
) -> RunIndex:
    """Check the resume (reading only), then drop a torn tail and add the lineage note.

    Returns the run's index (on disk: which prompts are done, the last ``seq``), which the
    caller closes. Telling the run's records from others takes the content hash of every
    prompt, read from ``meta.json`` (the dataset's own are compared with those), never the
    prompts themselves.
    """
    run_dir.lock()
    index = None
    try:
        header, old = read_effective_config(run_dir)
        run_dir.read_progress()  # damaged: refused here, before anything is written
        index = RunIndex.build(run_dir)  # meta.json and records.jsonl, checked
        differences = compare_configs(old, config, kinds)
        blocking = [d for d in differences if d.label == "result"]
        if blocking:
            raise refuse(run_dir.path, blocking, drift=False)
        recorded = [
            Difference(path, "result", old_value, new_value)
            for path, old_value, new_value in check_settings(
                index.meta, config, resolved, kinds, objects=objects
            )
        ]
        if recorded:
            raise refuse(run_dir.path, recorded, drift=False, recorded=True)
        foreign, count = foreign_records(index)
        if count:
            raise refuse_foreign(run_dir, foreign, count)
        drift, more = check_dataset(index, dataset)
        if drift:
            raise refuse(run_dir.path, drift, drift=True, more=more)
    except BaseException:
        if index is not None:
            index.close()
        run_dir.unlock()
        raise
    scan = index.scan
    if scan.torn:
        say(
            f"records.jsonl ended in a torn line ({len(scan.torn)} bytes, cut off when the run "
            "was killed); it was dropped and that prompt will run again"
        )
    run_dir.drop_torn_tail(scan)  # and a whole last record lacking its newline gets one
    dropped = run_dir.repair_events()
    if dropped:
        say(f"events.jsonl ended in a torn line ({dropped} bytes); it was dropped")
    dropped = repair_texts(run_dir.texts_file, scan.last_seq)
    if dropped:
        say(f"texts.jsonl ended in texts of records never written ({dropped} bytes); dropped")
    changes = [d for d in differences if d.label == "throughput"]
    note = lineage_note(changes, argv, " (--retry-failed)" if retry_failed else "")
    run_dir.write_config(render_effective_config(config, [*header, note]))
    done = int(index.value("SELECT COUNT(*) FROM latest"))
    again = (
        int(index.value("SELECT COUNT(*) FROM latest JOIN rec USING (line) WHERE status != 'ok'"))
        if retry_failed
        else 0
    )
    to_run = dataset.count - done + again
    shown = "; ".join(str(c) for c in changes) if changes else "no throughput change"
    say(
        f"resuming run {run_dir.path}: {done} of {dataset.count} prompts done, "
        f"{to_run} to run ({shown})"
    )
    return index


def _no_hashes(key: str, content_hash: str) -> None:
    """``meta.json``'s per-prompt hashes are not needed here (they are not read into memory)."""


def default_log(message: str) -> None:
    """Print a runner message on stderr (what the CLI uses)."""
    print(f"samplehooks: {message}", file=sys.stderr)
