"""``samplehooks run CONFIG --out DIR [--resume] [--retry-failed] [--executor ray ...]`` and
``samplehooks report``."""

from __future__ import annotations

import json
import signal
import sys
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

import typer

from sampling_core.cli.logs import logs_to_stderr
from sampling_core.runs import RunError, run_batch_sync, summarize
from sampling_core.runs.runner import default_log

__all__ = ["report_command", "run_command"]


class Executor(StrEnum):
    """Where a run's prompts are sampled (``run.executor``)."""

    local = "local"
    ray = "ray"


def run_command(
    config: Path = typer.Argument(..., help="The run config (YAML).", show_default=False),
    out: Path | None = typer.Option(
        None,
        "--out",
        "-o",
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
) -> None:
    """Sample every prompt of a JSONL dataset into a run directory that survives crashes.

    Killed or interrupted? Run the same command with --resume. Throughput settings
    (concurrency, rate limits, flushing, progress) may change on resume; settings that
    change results must match, or the resume is refused with the differences.
    """
    if retry_failed and not resume:
        _fail("--retry-failed continues a run: add --resume")
    if out is None:
        if resume:
            _fail("--resume continues a run: name its directory with --out DIR")
        out = default_run_dir(config)
    argv = (
        ["samplehooks", *sys.argv[1:]]
        if sys.argv[1:2] == ["run"]
        else _argv(config, out, resume, retry_failed)
    )
    previous = signal.signal(signal.SIGTERM, _interrupt)  # stop as cleanly as on Ctrl-C
    try:
        with logs_to_stderr():  # plugins' log lines never mix with the summary on stdout
            summary = run_batch_sync(
                config,
                out,
                resume=resume,
                retry_failed=retry_failed,
                argv=argv,
                log=default_log,
                executor=executor.value if executor is not None else None,
                ray_address=ray_address,
                workers=workers,
            )
    except RunError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        typer.echo(
            f"samplehooks: interrupted; finished prompts are saved. Continue with:\n"
            f"  samplehooks run {config} --out {out} --resume",
            err=True,
        )
        raise typer.Exit(130) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    typer.echo(summary.render())


def default_run_dir(config: Path, now: datetime | None = None) -> Path:
    """``runs/<config stem>-<UTC time>``: a new directory for every run started."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{config.stem}-{stamp}"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def report_command(
    run_dir: Path = typer.Argument(..., help="A run directory.", show_default=False),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
) -> None:
    """Print the summary of a run (finished or not): success rate, attempts, tokens, time."""
    try:
        summary = summarize(run_dir)
    except RunError as exc:
        _fail(str(exc))
    if as_json:
        typer.echo(json.dumps(summary.as_dict(), indent=2))
    else:
        typer.echo(summary.render())


def _argv(config: Path, out: Path, resume: bool, retry_failed: bool) -> list[str]:
    flags = ["--resume"] * resume + ["--retry-failed"] * retry_failed
    return ["samplehooks", "run", str(config), "--out", str(out), *flags]


def _fail(message: str) -> None:
    typer.echo(f"samplehooks: error: {message}", err=True)
    raise typer.Exit(2)
