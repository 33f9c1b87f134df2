"""``samplehooks run CONFIG --out DIR [--resume] [--retry-failed] [--executor ray ...]`` and
``samplehooks report``."""

from __future__ import annotations

import contextlib
import signal
import sys
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

import typer

from sampling_core.cli.kind_args import UsageError, plugin_arg
from sampling_core.cli.logs import logs_to_stderr
from sampling_core.cli.readable import fail
from sampling_core.errors import exception_text
from sampling_core.runs import RunError, run_batch_sync
from sampling_core.runs.execution.runner import default_log
from sampling_core.runs.reports.report import RunReport, build_report, report_of, write_report_json
from sampling_core.runs.store.index import RunIndex

__all__ = ["report_command", "run_command"]


class Executor(StrEnum):
    """Where a run's prompts are sampled (``run.executor``)."""

    local = "local"
    ray = "ray"


def run_command(
    config: Path = typer.Argument(
        ..., metavar="CONFIG", help="The run config (YAML).", show_default=False
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        "-o",
        metavar="DIR",
        help="The run directory to write (or, with --resume, to continue). "
        "Default: a new runs/CONFIG-NAME-UTC-TIME directory.",
        show_default=False,
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Continue the run in --out: finished prompts are skipped."
    ),
    retry_failed: bool = typer.Option(
        False, "--retry-failed", help="With --resume: run failed and errored prompts again."
    ),
    plugin: list[str] = typer.Option(
        [],
        "--plugin",
        "-p",
        help="A plugin added to the config's plugins: NAME or NAME:k=v,... (repeatable); "
        "as SAMPLEHOOKS_PLUGINS, it may change on --resume if it does not affect results.",
    ),
    executor: Executor | None = typer.Option(
        None,
        "--executor",
        help="Where prompts are sampled: local (this process) or ray (a Ray cluster). "
        "Default: run.executor of the config.",
        show_default=False,
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="With --executor ray: the cluster (HOST:6379, ray://HOST:10001, auto). "
        "Default: run.ray.address, else a new local cluster.",
        show_default=False,
    ),
    workers: int | None = typer.Option(
        None,
        "--workers",
        min=1,
        help="With --executor ray: how many workers. Default: run.ray.workers.",
        show_default=False,
    ),
    cache: Path | None = typer.Option(
        None,
        "--cache",
        metavar="PATH",
        help="A response cache (SQLite file): calls asked before (the same request body "
        "to the same model and server) are answered from it. Default: run.cache of the config.",
        show_default=False,
    ),
) -> None:
    """Sample every prompt of a JSONL dataset into a run directory that survives crashes.

    Killed or interrupted? Run the same command with --resume. Throughput settings
    (concurrency, rate limits, flushing, progress) may change on resume; settings that
    change results must match, or the resume is refused with the differences.
    """
    if retry_failed and not resume:
        fail("--retry-failed continues a run: add --resume")
    if out is None:
        if resume:
            fail("--resume continues a run: name its directory with --out DIR")
        out = default_run_dir(config)
    try:
        added = [{"name": name, "options": options} for name, options in map(plugin_arg, plugin)]
    except UsageError as exc:
        fail(exception_text(exc))
    argv = (
        ["samplehooks", *sys.argv[1:]]
        if sys.argv[1:2] == ["run"]
        else _argv(config, out, resume, retry_failed, plugin)
    )
    reports: list[RunReport] = []

    def report(index: RunIndex) -> None:
        """The report ``samplehooks report DIR`` prints, from the run's last reading."""
        with contextlib.suppress(RunError):  # the summary is printed instead
            reports.append(report_of(index))

    previous = signal.signal(signal.SIGTERM, _interrupt)  # stop as cleanly as on Ctrl-C
    try:
        with logs_to_stderr():  # plugins' log lines never mix with the summary on stdout
            summary = run_batch_sync(
                config,
                out,
                resume=resume,
                retry_failed=retry_failed,
                plugin_options=added,
                argv=argv,
                log=default_log,
                executor=executor.value if executor is not None else None,
                ray_address=ray_address,
                workers=workers,
                cache=cache,
                with_index=report,
            )
    except RunError as exc:
        fail(exception_text(exc))
    except OSError as exc:  # a full disk, a file too large, an I/O error while writing
        where = f" ({exc.filename})" if exc.filename else ""
        fail(
            f"the run stopped: {exc.strerror or exception_text(exc)}{where}; the prompts with "
            f"a record are saved: make room, then continue with: samplehooks run {config} "
            f"--out {out} --resume"
        )
    except KeyboardInterrupt:
        typer.echo(
            f"samplehooks: interrupted; finished prompts are saved. Continue with:\n"
            f"  samplehooks run {config} --out {out} --resume",
            err=True,
        )
        raise typer.Exit(130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    # the same report as `samplehooks report DIR` (failed prompts, cost, pass@k)
    typer.echo(reports[0].render() if reports else summary.render())


def default_run_dir(config: Path, now: datetime | None = None) -> Path:
    """``runs/<config stem>-<UTC time>``: a new directory for every run started."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{config.stem}-{stamp}"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def report_command(
    run_dir: Path = typer.Argument(..., metavar="DIR", help="A run directory.", show_default=False),
    as_json: bool = typer.Option(
        False, "--json", help="Print totals, pass@k and one row per prompt as JSON."
    ),
    top: int = typer.Option(10, "--top", min=0, help="Prompts not ok to list (text only)."),
) -> None:
    """Print the report of a run (finished or not): success, attempts, tokens, cost, pass@k,
    and the prompts that failed with their reasons."""
    try:
        if as_json:  # every prompt's row, written as it is read
            write_report_json(run_dir, sys.stdout)
            return
        report = build_report(run_dir, top=top)
    except RunError as exc:
        fail(exception_text(exc))
    typer.echo(report.render(top=top))


def _argv(
    config: Path, out: Path, resume: bool, retry_failed: bool, plugins: list[str]
) -> list[str]:
    flags = ["--resume"] * resume + ["--retry-failed"] * retry_failed
    flags += [part for spec in plugins for part in ("--plugin", spec)]
    return ["samplehooks", "run", str(config), "--out", str(out), *flags]
