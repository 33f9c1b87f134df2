"""The ``samplehooks`` typer application; each sub-command lives in its own module."""

from __future__ import annotations

from importlib import metadata
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from sampling_core.cli.plugins_cmd import plugins_app
from sampling_core.cli.run_cmd import report_command, run_command
from sampling_core.cli.sample_cmd import sample_command
from sampling_core.cli.trace_cmd import trace_app

# click's UsageError, wherever this typer version takes click from (it may vendor it).
_UsageError: type[Exception] = next(
    cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "UsageError"
)


class _OneLineErrors(TyperGroup):
    """A command-line mistake (unknown option or command, bad value) as one line, exit 2.

    click prints the usage and a boxed message; the rest of the CLI reports a user's
    mistake as one ``samplehooks: error: ...`` line on stderr, and so do these.
    """

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except _UsageError as exc:
            _usage_error(exc)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _UsageError as exc:
            _usage_error(exc)


def _usage_error(exc: Any) -> NoReturn:
    if type(exc).__name__ == "NoArgsIsHelpError":  # no arguments: the help is the answer
        raise exc
    message = " ".join(str(exc.format_message()).split())
    ctx = getattr(exc, "ctx", None)
    where = f" (see '{ctx.command_path if ctx is not None else 'samplehooks'} --help')"
    typer.echo(f"samplehooks: error: {message}{where}", err=True)
    raise typer.Exit(2)


app = typer.Typer(
    name="samplehooks",
    cls=_OneLineErrors,
    help="Concurrent LLM sampling with validation, repair and pluggy hooks.",
    no_args_is_help=True,
    add_completion=False,
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
app.command("run")(run_command)
app.command("report")(report_command)
app.command("sample")(sample_command)


def main() -> None:
    """Entry point of the ``samplehooks`` console script."""
    app()
