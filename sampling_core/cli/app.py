"""The ``samplehooks`` typer application; each sub-command lives in its own module."""

from __future__ import annotations

from importlib import metadata

import typer

from sampling_core.cli.compare_cmd import compare_command
from sampling_core.cli.plugins_cmd import plugins_app
from sampling_core.cli.readable import ReadableCommand, ReadableGroup
from sampling_core.cli.rescore_cmd import rescore_command
from sampling_core.cli.run_cmd import report_command, run_command
from sampling_core.cli.sample_cmd import sample_command
from sampling_core.cli.trace_cmd import trace_app
from sampling_core.cli.view_cmd import view_command

app = typer.Typer(
    name="samplehooks",
    cls=ReadableGroup,
    help="Concurrent LLM sampling with validation, repair and pluggy hooks.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"samplehooks {metadata.version('samplehooks')}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Concurrent LLM sampling with validation, repair and pluggy hooks."""


app.add_typer(plugins_app, name="plugins")
app.add_typer(trace_app, name="trace")
app.command("run", cls=ReadableCommand)(run_command)
app.command("report", cls=ReadableCommand)(report_command)
app.command("sample", cls=ReadableCommand)(sample_command)
app.command("view", cls=ReadableCommand)(view_command)
app.command("rescore", cls=ReadableCommand)(rescore_command)
app.command("compare", cls=ReadableCommand)(compare_command)


def main() -> None:
    """Entry point of the ``samplehooks`` console script."""
    app()
