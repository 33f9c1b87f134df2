"""``samplehooks rescore RUN_DIR --out NEW_DIR [--config CONFIG.yaml] [--require KIND:VALUE]``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import typer

from sampling_core.cli.kind_args import UsageError, requirement_spec_arg
from sampling_core.cli.logs import logs_to_stderr
from sampling_core.cli.readable import fail
from sampling_core.cli.sample_cmd import REQUIRE_HELP
from sampling_core.errors import exception_text
from sampling_core.kinds import KindError, collect_kinds
from sampling_core.runs import RunError, rescore_sync
from sampling_core.runs.execution.runner import default_log
from sampling_core.runs.reports.report import report_of
from sampling_core.runs.store.index import RunIndex
from sampling_core.view.page import indexed_page_data, render_page

__all__ = ["VIEW_FILE", "rescore_command"]

VIEW_FILE = "view.html"


def rescore_command(
    run_dir: Path = typer.Argument(
        ..., metavar="RUN_DIR", help="A finished run directory.", show_default=False
    ),
    out: Path = typer.Option(
        ...,
        "--out",
        "-o",
        metavar="NEW_DIR",
        help="Where the rescored run goes: a new or empty folder, outside RUN_DIR.",
        show_default=False,
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        metavar="CONFIG",
        help="A run config whose requirements replace the run's (its other settings that "
        "change results must be the run's).",
        show_default=False,
    ),
    require: list[str] = typer.Option(
        [],
        "--require",
        "-r",
        metavar="KIND:VALUE",
        help=REQUIRE_HELP.replace("A requirement", "A requirement added to the run's"),
        show_default=False,
    ),
) -> None:
    """Check every attempt a run kept against new requirements, without generating again.

    Writes a complete run in NEW_DIR (records, meta.json naming rescored_from, report.json,
    view.html; pass@k recomputed) and prints its report. No backend is called.
    """
    try:
        kinds = collect_kinds()
        added = [dict([requirement_spec_arg(kinds, spec)]) for spec in require]
    except (UsageError, KindError) as exc:
        fail(exception_text(exc))
    argv = ["samplehooks", *sys.argv[1:]] if sys.argv[1:2] == ["rescore"] else None
    shown: list[str] = []
    page = out / VIEW_FILE
    problem: list[str] = []

    def show(index: RunIndex) -> None:
        """The report and the page, from the index the new run was read into once."""
        shown.append(report_of(index).render())
        try:
            page.write_text(render_page(indexed_page_data([index])), encoding="utf-8")
        except (OSError, RunError) as exc:
            problem.append(exception_text(exc))

    try:
        with logs_to_stderr():
            rescore_sync(
                run_dir,
                out,
                config=config,
                requirements=added,
                kinds=kinds,
                argv=argv,
                log=default_log,
                with_index=show,
            )
    except RunError as exc:
        if not isinstance(exc.__cause__, OSError):
            fail(exception_text(exc))
        _stopped(exc.__cause__, run_dir, out)
    except OSError as exc:
        _stopped(exc, run_dir, out)
    if problem:
        fail(f"the rescored run is in {out}, but its page could not be written: {problem[0]}", 1)
    typer.echo("\n".join(shown))
    typer.echo(f"wrote {out} (view: {page})")


def _stopped(exc: OSError, run_dir: Path, out: Path) -> NoReturn:
    """A write failed (a full disk, a file too large): the new folder was removed."""
    where = f" ({exc.filename})" if exc.filename else ""
    fail(
        f"the rescore stopped: {exc.strerror or exception_text(exc)}{where}; nothing was "
        f"written to {out} (the run in {run_dir} is unchanged): make room, then run the "
        "same command again"
    )
