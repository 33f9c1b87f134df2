"""``samplehooks view DIR [DIR_B] [-o FILE.html] [--open]``: a run as one offline HTML page."""

from __future__ import annotations

import webbrowser
from pathlib import Path

import typer

from sampling_core.cli.readable import fail
from sampling_core.errors import exception_text
from sampling_core.runs import RunError
from sampling_core.runs.reports.outputs import check_output, write_output
from sampling_core.view import build_page

__all__ = ["view_command"]

PAGE_SUFFIXES = (".html", ".htm")


def view_command(
    run_dirs: list[Path] = typer.Argument(
        ..., help="A run directory, or two to compare.", show_default=False
    ),
    output: Path | None = typer.Option(
        None,
        "--output",
        "-o",
        help="The HTML file to write (default: view.html in the run directory, or "
        "compare-A-vs-B.html beside the first run when comparing).",
        show_default=False,
    ),
    open_page: bool = typer.Option(False, "--open", help="Open the page in a web browser."),
    whole_texts: bool = typer.Option(
        False,
        "--texts",
        help="Embed each attempt's whole text (kept in the run's texts.jsonl), not only its "
        "first 400 characters: a bigger page.",
    ),
) -> None:
    """Write one self-contained HTML page of a run: charts, a table of its prompts to filter
    and sort, each prompt's attempts as a timeline. Works offline and on a run in progress;
    two directories are compared side by side."""
    if len(run_dirs) > 2:
        fail(f"view takes one run directory, or two to compare (got {len(run_dirs)})")
    if output is None:
        first = run_dirs[0]
        if len(run_dirs) == 1:
            output = first / "view.html"
        else:
            output = first.parent / f"compare-{first.name}-vs-{run_dirs[1].name}.html"
    try:  # never through a link, never over a run's files, never half-written
        check_output(output, suffixes=PAGE_SUFFIXES, what="view page")
        page = build_page(list(run_dirs), whole_texts=whole_texts)
        write_output(output, page, suffixes=PAGE_SUFFIXES, what="view page")
    except RunError as exc:
        fail(exception_text(exc))
    typer.echo(f"wrote {output} ({len(page.encode('utf-8')) // 1024 + 1} KB)")
    if open_page:
        webbrowser.open(output.resolve().as_uri())
