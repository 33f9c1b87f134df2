"""Rescoring a run: every kept attempt checked against new requirements, with no backend call.

``samplehooks rescore RUN_DIR --out NEW_DIR [--config CONFIG.yaml] [--require KIND:VALUE]``
(:func:`rescore` from Python) reads a finished run, checks each attempt's whole text (kept
in ``texts.jsonl``) against the new requirements, and writes a complete new run in
``NEW_DIR``: its effective config (the source's, with the new requirements), ``meta.json``
naming ``rescored_from``, records and texts, progress and ``report.json``; pass@k comes out
of the new records as for any run. The new requirements are the source's, or those of
``--config`` (whose other settings that change results must be the run's: rescoring makes
no generation), plus every ``--require``. Checks with context get the dataset line and the
attempt's messages and options.

Everything is checked before anything is written, and the new run is built under a
temporary name beside ``NEW_DIR`` and renamed into place at the end: a refusal, an error or
Ctrl-C part way leave nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import structlog
from filelock import FileLock

from sampling_core.errors import exception_text
from sampling_core.hooks.entry_points import PluginSettings
from sampling_core.kinds import KindError, KindRegistry, collect_kinds
from sampling_core.redaction import shown
from sampling_core.runs.config.components import (
    build_requirements,
    build_strategy,
    prompt_seed,
)
from sampling_core.runs.config.config import RequirementSpec, RunConfig
from sampling_core.runs.config.dataset import Dataset, PromptIndex, read_dataset
from sampling_core.runs.config.loading import load_config, refuse_unwritable
from sampling_core.runs.errors import ConfigError, DatasetError, RunDirError
from sampling_core.runs.reports.outputs import output_file
from sampling_core.runs.reports.report import RunReport, iter_rows, report_of, write_report
from sampling_core.runs.reports.summary import RunSummary, summary_of
from sampling_core.runs.rescoring.rescore_record import Rescoring, rescore_record
from sampling_core.runs.resume.integrity import SETTINGS_KEY, settings_meta
from sampling_core.runs.resume.resume import (
    compare_configs,
    new_run_meta,
    provenance_header,
    read_effective_config,
    render_effective_config,
    samplehooks_version,
)
from sampling_core.runs.store.files import remove_stale_staging
from sampling_core.runs.store.index import RunIndex
from sampling_core.runs.store.kept_texts import TextsJoin
from sampling_core.runs.store.meta_hashes import read_run_meta
from sampling_core.runs.store.store import RunDirectory, utc_now

__all__ = ["REPORT_FILE", "rescore", "rescore_sync"]

logger = structlog.get_logger("samplehooks.runs")
REPORT_FILE = "report.json"
_RESCORABLE = ("requirements", "check_timeout_s", "plugins")
"""Config settings a rescore may change (plugins do not run in a rescore)."""


async def rescore(
    run_dir: str | Path,
    out_dir: str | Path,
    *,
    config: RunConfig | str | Path | None = None,
    requirements: Iterable[RequirementSpec | Mapping[str, Any] | str] = (),
    kinds: KindRegistry | None = None,
    argv: Sequence[str] | None = None,
    log: Callable[[str], None] | None = None,
    with_index: Callable[[RunIndex], None] | None = None,
) -> RunSummary:
    """Check every kept attempt of the run in ``run_dir`` against new requirements and
    write the rescored run to ``out_dir``; returns its summary. No backend is called.

    ``config`` (a :class:`RunConfig` or a YAML path) gives the requirements (and
    ``check_timeout_s``, and where the dataset now is); ``requirements`` are added to them
    (``{KIND: VALUE}`` as in a config). ``kinds`` replaces the installed plugins' kinds.
    ``with_index`` is called with the new run's index (the one it is read from: its report
    and summary come from there too). The source's records are read once, the new run's
    once.

    Raises :class:`~sampling_core.runs.errors.RunError` before anything is written: the
    source is missing, not finished or keeps no whole texts; ``out_dir`` is the source,
    inside it, or not empty; ``config`` changes more than the requirements; the dataset
    changed since the run.
    """
    say = log or (lambda message: logger.info("run.message", message=message))
    source = RunDirectory(Path(run_dir))
    out = Path(out_dir)
    _refuse_places(source.path, out)
    source.check_is_run(resuming=False)
    if kinds is None:
        try:
            kinds = collect_kinds(PluginSettings.from_env())
        except KindError as exc:
            raise ConfigError(exception_text(exc)) from exc
    source.lock()  # no session may append to it meanwhile
    try:
        _, old = read_effective_config(source)
        meta = read_run_meta(source, lambda key, value: None)  # its hashes are not needed
        new = _new_config(old, config, requirements, kinds)
        refuse_unwritable(new)  # a lone surrogate (a --require from bytes not UTF-8)
        # the source's one reading: its records kept in the index, to be rescored from there
        with RunIndex.build(source, keep_records=True) as index:
            _refuse_unfinished(source, index)
            dataset = read_dataset(new.dataset, kinds)
            if dataset.fingerprint != meta["dataset"].get("fingerprint"):
                raise DatasetError(
                    f"{new.dataset.path} is not the dataset {source.path} was run on (its "
                    "prompts changed since); rescoring needs each prompt's line as it was: "
                    "restore it (or give --config with dataset.path where it now is). "
                    "Nothing was written"
                )
            how = _rescoring(new, kinds)  # the new requirements are built here, or refused
            argv = [shown(a) for a in argv] if argv is not None else ["(Python API)", "rescore"]
            built, report = await _build(source, out, new, meta, dataset, kinds, how, argv, index)
    finally:
        source.unlock()
    with built:  # the new run's one reading: its report, its summary and the caller's
        if with_index is not None:
            with_index(built)
    say(f"rescored {source.path} into {out}")
    return report.summary


def rescore_sync(run_dir: str | Path, out_dir: str | Path, **kwargs: Any) -> RunSummary:
    """:func:`rescore` from synchronous code."""
    return anyio.run(partial(rescore, run_dir, out_dir, **kwargs))


# -- refusals ------------------------------------------------------------------------------


def _refuse_places(source: Path, out: Path) -> None:
    """``out`` must be a new or empty folder, not the source nor inside it."""
    if out.is_symlink():
        raise RunDirError(
            f"--out {out} is a symbolic link; give a new folder (a rescore writes a folder "
            "of its own and renames it into place, never through a link; nothing was written)"
        )
    here, there = source.resolve(), out.resolve()
    if there == here or here in there.parents:
        raise RunDirError(
            f"--out {out} is {'the run itself' if there == here else 'inside the run'} "
            f"{source}; give a folder outside it (nothing was written)"
        )
    if out.exists() and not out.is_dir():
        raise RunDirError(f"--out {out} is a file; give a new folder (nothing was written)")
    if out.is_dir() and any(out.iterdir()):
        raise RunDirError(
            f"--out {out} already holds files; give a new or empty folder (nothing was written)"
        )


def _refuse_unfinished(source: RunDirectory, index: RunIndex) -> None:
    summary = summary_of(index)
    if not summary.complete:
        raise RunDirError(
            f"{source.path} is not finished: {summary.pending} of {summary.total} prompts have "
            f"no record; finish it first (samplehooks run CONFIG --out {source.path} "
            "--resume), then rescore it (nothing was written)"
        )
    if summary.foreign:
        raise RunDirError(
            f"{source.path}/records.jsonl holds {summary.foreign} record(s) that are not of "
            "this run's prompts; remove those lines first (nothing was written)"
        )
    if not source.texts_file.is_file() and any(summary.attempts_histogram.keys() - {0}):
        raise RunDirError(
            f"{source.path} keeps no whole texts (no texts.jsonl: it was made by a version of "
            "samplehooks that kept the first 400 characters of each attempt); rescoring "
            "needs every attempt's whole text: run it again (nothing was written)"
        )


def _new_config(
    old: RunConfig,
    config: RunConfig | str | Path | None,
    added: Iterable[RequirementSpec | Mapping[str, Any] | str],
    kinds: KindRegistry,
) -> RunConfig:
    """The source's config with the new requirements (``config``'s, or the source's, then
    ``added``); ``config`` may change nothing else that changes results."""
    update: dict[str, Any] = {}
    if config is not None:
        given = config if isinstance(config, RunConfig) else load_config(config, kinds=kinds)
        blocking = [
            d
            for d in compare_configs(old, given, kinds)
            if d.label == "result" and not d.path.startswith(_RESCORABLE)
        ]
        if blocking:
            shown = "; ".join(str(d) for d in blocking[:5])
            raise ConfigError(
                "rescoring changes the requirements only; the config differs from the run's "
                f"in settings that change what was generated (old -> new): {shown}. Give "
                "them the run's values, or sample again with `samplehooks run` (nothing was "
                "written)"
            )
        update = {
            "requirements": list(given.requirements),
            "check_timeout_s": given.check_timeout_s,
            "dataset": given.dataset,
        }
    try:
        more = [RequirementSpec.model_validate(spec) for spec in added]
    except ValueError as exc:
        raise ConfigError(f"requirements: {exception_text(exc)}") from exc
    update["requirements"] = [*update.get("requirements", old.requirements), *more]
    return old.model_copy(update=update)


# -- writing ---------------------------------------------------------------------------------


async def _build(
    source: RunDirectory,
    out: Path,
    config: RunConfig,
    meta: dict[str, Any],
    dataset: Dataset,
    kinds: KindRegistry,
    how: Rescoring,
    argv: list[str],
    index: RunIndex,
) -> tuple[RunIndex, RunReport]:
    """Write the rescored run under a temporary name (held by its lock: a rescore killed
    meanwhile leaves it to the next one to remove), then rename it to ``out``; its index
    (read once, pointed at ``out``), which the caller closes, and its report (written in
    it as ``report.json`` before the rename: NEW_DIR is whole or absent)."""
    made = [p for p in (out.parent, *out.parent.parents) if not p.exists()]
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(out.parent, out.name, "rescore")
    staging = out.parent / f".{out.name}.rescore-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    building = FileLock(f"{staging}.lock", timeout=0, thread_local=False)
    building.acquire()
    built = RunDirectory(staging)
    header = provenance_header(samplehooks_version(), argv, None, rescored_from=source.path)
    resolved = {
        path: value
        for path, value in meta.get(SETTINGS_KEY, {}).get("values", {}).items()
        if path.startswith("backend (resolved).")
    }
    new_index: RunIndex | None = None
    try:
        built.create(
            render_effective_config(config, header), _meta(source, config, dataset, resolved, kinds)
        )
        started = utc_now()
        records = await _write_records(source, built, config, dataset, kinds, how, index)
        new_index = RunIndex.build(built)
        done = summary_of(new_index)
        built.write_progress(
            {
                "state": "finished",
                "total": done.total,
                "done": done.done,
                "ok": done.ok,
                "failed": done.failed,
                "error": done.error,
                "not_known": done.not_known_prompts,
                "pending": done.pending,
                "updated": utc_now(),
                "sessions": [
                    {
                        "started": started,
                        "argv": argv,
                        "elapsed_s": 0.0,
                        "records": records,
                        "state": "finished",
                        "updated": utc_now(),
                    }
                ],
            }
        )
        report = report_of(new_index, top=0)  # in the folder before it is NEW_DIR: all or none
        with output_file(staging / REPORT_FILE, suffixes=(".json",), what="report") as handle:
            write_report(report.as_dict(), (row.as_dict() for row in iter_rows(new_index)), handle)
        if out.exists():
            out.rmdir()  # empty: checked before
        os.rename(staging, out)
    except BaseException:
        if new_index is not None:
            new_index.close()
        shutil.rmtree(staging, ignore_errors=True)
        _unlock(building, staging)
        for folder in made:  # the folders made for NEW_DIR, innermost first
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    _unlock(building, staging)
    new_index.run_dir = RunDirectory(out)  # its tables are the same wherever the files are
    return new_index, report


def _unlock(building: FileLock, staging: Path) -> None:
    """Let go of the staging folder's lock, and remove the lock's file."""
    building.release()
    with contextlib.suppress(OSError):
        os.unlink(f"{staging}.lock")


def _meta(
    source: RunDirectory,
    config: RunConfig,
    dataset: Dataset,
    resolved: dict[str, Any],
    kinds: KindRegistry,
) -> dict[str, Any]:
    return {
        **new_run_meta(dataset, settings_meta(config, resolved, kinds)),
        "rescored_from": {
            "run_dir": str(source.path.resolve()),
            "requirements": [spec.model_dump(mode="json") for spec in config.requirements],
        },
    }


async def _write_records(
    source: RunDirectory,
    built: RunDirectory,
    config: RunConfig,
    dataset: Dataset,
    kinds: KindRegistry,
    how: Rescoring,
    source_index: RunIndex,
) -> int:
    """Rescore every record of ``source`` (kept in ``source_index``) in order into
    ``built``; the records written. Ctrl-C is acted on between two records."""
    index = PromptIndex(dataset)
    texts = TextsJoin(source.texts_file)
    earlier: Counter[str] = Counter()
    written = 0
    writer = built.open_writer(flush_every=256, fsync=False)
    try:
        for record in source_index.records():
            await anyio.lowlevel.checkpoint()  # a cancellation (Ctrl-C) ends it here
            seq, key = record.seq, record.key
            retry = earlier[key]  # its records before this one: which retry this one was
            earlier[key] += 1
            entries = record.completed()
            if record.status == "error" or not entries:
                rescored = {
                    **record.as_json(),
                    "session": 1,
                    "rescored": {"from_seq": seq, "not_run": 0},
                }
            else:
                item = index.item(record.line or 0)
                if item is None or item.key != key:
                    raise DatasetError(
                        f"{dataset.path}: prompt {key!r} is no longer on line "
                        f"{record.line}; restore the dataset as it was run (nothing "
                        "was written)"
                    )
                kept = texts.get(seq, record.sampling_id)
                if kept is None or any((e.subsample, e.attempt) not in kept for e in entries):
                    raise RunDirError(
                        f"{source.texts_file} lacks the whole text of an attempt of prompt "
                        f"{key!r} (record {seq}); rescoring needs every attempt's text "
                        "(nothing was written)"
                    )
                own = _requirements_of(item.requirements, kinds)
                seed = prompt_seed(config.seed, key, retry)
                rescored = await rescore_record(record, kept, item, own, how, seed)
            writer.append(rescored)
            written += 1
    finally:
        writer.close()
    return written


def _rescoring(config: RunConfig, kinds: KindRegistry) -> Rescoring:
    """What every record is checked with: the new requirements and the run's strategy,
    selection, budgets and options (a kind that cannot be built is a ConfigError; the
    backend is never built)."""
    try:
        strategy = build_strategy(config.strategy, kinds)
    except KindError as exc:
        raise ConfigError(f"strategy: {exception_text(exc)}") from exc
    return Rescoring(
        requirements=_requirements_of(config.requirements, kinds),
        strategy=strategy,
        selection=config.selection,
        early_exit=config.budgets.early_exit,
        loop_budget=config.budgets.loop_budget,
        concurrency_budget=config.budgets.concurrency_budget,
        options=config.options.as_options(),
        check_timeout=config.check_timeout_s,
    )


def _requirements_of(specs: Iterable[RequirementSpec], kinds: KindRegistry) -> list[Any]:
    built = []
    for index, spec in enumerate(specs):
        try:
            built.extend(build_requirements([spec], kinds))
        except KindError as exc:
            raise ConfigError(
                f"requirements[{index}]: {exception_text(exc)} (nothing was written)"
            ) from exc
    return built
