"""``samplehooks compare A B [--json]``: is run B better than run A, prompt by prompt?"""

from __future__ import annotations

from pathlib import Path

import typer

from sampling_core.cli.readable import fail
from sampling_core.errors import exception_text
from sampling_core.redaction import json_text
from sampling_core.runs import RunError, compare_runs

__all__ = ["compare_command"]


def compare_command(
    run_a: Path = typer.Argument(
        ..., metavar="A", help="The first run directory.", show_default=False
    ),
    run_b: Path = typer.Argument(
        ..., metavar="B", help="The run directory compared with it.", show_default=False
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
) -> None:
    """Compare two runs over the prompts both have (matched by key): for the success rate
    and each pass@k, pass^k and maj@k both measured, the paired difference B - A with its
    95% bootstrap interval, McNemar's exact p-value (pass-or-fail measures), the verdict
    (B is better, A is better, or tied) and the smallest difference this many prompts could
    detect. See docs/comparing-runs.md."""
    try:
        comparison = compare_runs(run_a, run_b)
    except RunError as exc:
        fail(exception_text(exc))
    if as_json:
        typer.echo(json_text(comparison.as_dict(), indent=2))
    else:
        typer.echo(comparison.render())
