"""Command classes that give ``--help`` readable placeholders and every error one line.

typer names a value by its Python type (``<int>``, ``<list[str]>``, ``<bool>`` on a flag)
and a required argument in braces (``{prompt}``). Here an option shows the placeholder it
declares (``N``, ``KIND:VALUE``) or, failing that, its name in capitals; a flag shows none;
an argument shows its name in capitals, in brackets only when it is optional.

A mistake on the command line (an unknown option, a bad value) is printed as one
``samplehooks: error: ...`` line with exit status 2, like every other error of the CLI.
"""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup

from sampling_core.redaction import ScrubbedStream, printable, refresh_environment

__all__ = ["ERROR_PREFIX", "ReadableCommand", "ReadableGroup", "fail"]

ERROR_PREFIX = "samplehooks: error:"

# click's UsageError, wherever this typer version takes click from (it may vendor it).
_UsageError: type[Exception] = next(
    cls for cls in typer.BadParameter.__mro__ if cls.__name__ == "UsageError"
)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``samplehooks: error: MESSAGE`` on stderr and exit with ``code``.

    The message is one line unless it carries details of its own (a refused resume lists
    the differences, one per line).
    """
    typer.echo(f"{ERROR_PREFIX} {printable(message, lines=True)}", err=True)
    raise typer.Exit(code)


def _placeholders(params: list[Any]) -> None:
    """Give every parameter a readable metavar (only where it declared none)."""
    for param in params:
        if param.param_type_name == "argument":
            # typer adds the Python type (``<str>``, ``<path>``) beside the name; the
            # argument's name and help say what it is.
            param.display_type_rich = _no_type
        if param.metavar is not None:
            continue
        if param.param_type_name == "option" and (
            getattr(param, "is_flag", False) or isinstance(param.default, bool)
        ):
            param.metavar = ""  # a flag takes no value: no placeholder
        else:
            param.metavar = (param.name or "value").upper()


def _no_type(ctx: Any) -> None:
    return None


class _Readable:
    """Shared by commands and groups: placeholders, usage line, one-line usage errors."""

    options_metavar: str | None

    def get_params(self, ctx: Any) -> list[Any]:
        # also the options added late: --help, --install-completion, --show-completion
        params: list[Any] = super().get_params(ctx)  # type: ignore[misc]
        _placeholders(params)
        return params

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = super().collect_usage_pieces(ctx)  # type: ignore[misc]
        arguments = [p for p in self.get_params(ctx) if p.param_type_name == "argument"]
        readable = [p.metavar if p.required else f"[{p.metavar}]" for p in arguments]
        head = [self.options_metavar] if self.options_metavar else []
        tail = pieces[len(head) + len(arguments) :]  # a group's COMMAND [ARGS]...
        return [*head, *readable, *tail]

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)  # type: ignore[misc]
        except _UsageError as exc:
            _usage_error(exc)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except _UsageError as exc:
            _usage_error(exc)


class ReadableCommand(_Readable, TyperCommand):
    """A typer command with readable help placeholders and one-line usage errors."""


class ReadableGroup(_Readable, TyperGroup):
    """A typer group with readable help placeholders and one-line usage errors.

    Every command's output leaves through its ``invoke``: scrubbed of secrets, and text the
    terminal cannot encode is shown with replacement characters, never a crash.
    """

    def invoke(self, ctx: Any) -> Any:
        if isinstance(sys.stdout, ScrubbedStream):  # a subgroup of a group that wrapped them
            return super().invoke(ctx)
        refresh_environment()
        out, err = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = ScrubbedStream(out), ScrubbedStream(err)
        try:
            return super().invoke(ctx)
        finally:
            sys.stdout, sys.stderr = out, err


def _usage_error(exc: Any) -> NoReturn:
    if type(exc).__name__ == "NoArgsIsHelpError":  # no arguments: the help is the answer
        raise exc
    message = " ".join(str(exc.format_message()).split())
    ctx = getattr(exc, "ctx", None)
    where = f" (see '{ctx.command_path if ctx is not None else 'samplehooks'} --help')"
    fail(f"{message}{where}")
