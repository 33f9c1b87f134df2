"""``samplehooks sample "PROMPT"``: sample one answer and show every attempt.

The answer chosen is printed on stdout (alone, so it can be piped); the per-attempt table
and the summary go to stderr. Exit status: 0 when an answer met every requirement, 1 when
none did (or the backend failed), 2 for a mistake in the command line.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sampling_core.cli.kind_args import (
    UsageError,
    backend_arg,
    plugin_arg,
    requirement_arg,
    strategy_arg,
)
from sampling_core.cli.logs import logs_to_stderr
from sampling_core.errors import SamplehooksError
from sampling_core.kinds import collect_kinds
from sampling_core.results import SamplingResult
from sampling_core.sampler import Sampler

__all__ = ["sample_command"]

REQUIRE_HELP = (
    "A requirement, repeatable: KIND:VALUE of any requirement kind (see `samplehooks plugins`), "
    "e.g. regex:PATTERN, contains:TEXT, not-contains:TEXT, max-words:N, min-words:N, "
    "max-chars:N, json."
)


def attempts_table(result: SamplingResult) -> Table:
    """One row per completed attempt: where it ran, whether it passed, latency and tokens."""
    table = Table(box=box.SIMPLE_HEAD, title="attempts", title_justify="left")
    for column, justify in (
        ("iteration", "right"),
        ("subsample", "right"),
        ("attempt", "right"),
        ("passed", "center"),
        ("latency", "right"),
        ("tokens", "right"),
        ("answer", "left"),
    ):
        table.add_column(
            column,
            justify=justify,  # type: ignore[arg-type]
            no_wrap=True,
            overflow="ellipsis",
            min_width=None if column == "answer" else len(column),
            ratio=1 if column == "answer" else None,
        )
    for a in sorted(result.attempts, key=lambda a: a.sequence):
        text = a.text.strip().replace("\n", " ")
        table.add_row(
            str(a.iteration),
            str(a.subsample_index),
            str(a.attempt),
            "[green]yes[/]" if a.passed else "[red]no[/]",
            f"{a.latency_s * 1000:.0f} ms",
            f"{a.generation.usage.input_tokens}/{a.generation.usage.output_tokens}",
            escape(text),
        )
    return table


def sample_command(
    prompt: str = typer.Argument(..., help="The prompt (one user message)."),
    require: list[str] = typer.Option([], "--require", "-r", help=REQUIRE_HELP),
    loop_budget: int = typer.Option(3, "--loop-budget", "-l", help="Attempts per subsample."),
    concurrency: int = typer.Option(
        1, "--concurrency", "-c", help="Subsamples run at once (and local model slots)."
    ),
    strategy: str = typer.Option(
        "rejection",
        "--strategy",
        "-s",
        help="How failed attempts are repaired: NAME or NAME:k=v,... (rejection, repair, "
        "multiturn, best-of-n, majority, or one a plugin adds).",
    ),
    plugin: list[str] = typer.Option(
        [],
        "--plugin",
        "-p",
        help="A plugin to enable (repeatable): NAME or NAME:k=v,... with its options, "
        "e.g. budget_guard:max_tokens=5000.",
    ),
    backend: str = typer.Option(
        "local",
        "--backend",
        "-b",
        help="The backend kind: local (embedded model), openai, scripted, or one a plugin adds.",
    ),
    backend_option: list[str] = typer.Option(
        [], "--backend-option", "-B", help="An option of the backend kind: NAME=VALUE (repeatable)."
    ),
    model: str | None = typer.Option(
        None, "--model", "-m", help="The model name (openai) or .gguf path (local)."
    ),
    base_url: str | None = typer.Option(
        None, "--base-url", help="An OpenAI-compatible server's base URL (openai)."
    ),
    api_key_env: str | None = typer.Option(
        None,
        "--api-key-env",
        help="The variable holding the API key (openai; default OPENAI_API_KEY).",
    ),
    max_tokens: int = typer.Option(64, "--max-tokens", help="The most tokens per answer."),
    temperature: float | None = typer.Option(None, "--temperature", help="Sampling temperature."),
    seed: int | None = typer.Option(None, "--seed", help="Derive a seed for every attempt."),
    reply: list[str] = typer.Option(
        [], "--reply", help="A canned answer for --backend scripted (repeatable, in order)."
    ),
) -> None:
    """Sample an answer to PROMPT that meets every --require, and show each attempt."""
    err = Console(stderr=True, highlight=False)
    try:
        kinds = collect_kinds()
        requirements = [requirement_arg(kinds, spec) for spec in require]
        chosen_strategy = strategy_arg(kinds, strategy)
        plugins = [plugin_arg(spec) for spec in plugin]
        shortcuts = {
            "--reply": ("replies", list(reply)),
            "--model": ("model", model),
            "--base-url": ("base_url", base_url),
            "--api-key-env": ("api_key_env", api_key_env),
        }
        defaults = {"parallel": max(concurrency, 1)}  # the local model's server slots
        chosen = backend_arg(kinds, backend, backend_option, shortcuts, defaults)
        sampler = Sampler(chosen, plugins=plugins)
    # LookupError: an unknown plugin; ValueError: a value a backend refuses (--api-key-env)
    except (UsageError, SamplehooksError, LookupError, ValueError) as exc:
        _fail(err, str(exc), 2)
    options: dict[str, Any] = {"max_tokens": max_tokens}
    if temperature is not None:
        options["temperature"] = temperature

    async def run() -> SamplingResult:
        async with sampler:  # stops the local model's server, closes HTTP connections
            return await sampler.sample(
                prompt,
                requirements=requirements,
                strategy=chosen_strategy,
                loop_budget=loop_budget,
                concurrency_budget=concurrency,
                seed=seed,
                options=options,
            )

    # stdout carries the answer alone; log lines (e.g. from --plugin tracing) go to stderr.
    try:
        with logs_to_stderr():
            result = anyio.run(run)
    except ValueError as exc:  # a bad budget (BudgetError) and the like
        _fail(err, str(exc), 2)
    except SamplehooksError as exc:  # the backend failed (a missing model, a refused key)
        _fail(err, str(exc), 1)
    except Exception as exc:
        _fail(err, f"{type(exc).__name__}: {exc}", 1)
    _report(err, result)
    if result.text is not None:
        sys.stdout.write(result.text.strip() + "\n")
    raise typer.Exit(0 if result.success else 1)


def _report(err: Console, result: SamplingResult) -> None:
    err.print(attempts_table(result))
    usage = result.usage
    verdict = "[green]passed[/]" if result.success else "[red]no answer met every requirement[/]"
    err.print(
        f"{verdict} · stop: {result.stop_reason} · attempts: {result.iterations_used} · "
        f"cancelled: {result.cancelled} · tokens: {usage.input_tokens} in / "
        f"{usage.output_tokens} out · {result.elapsed_s:.2f} s",
        soft_wrap=True,
    )
    for error in result.errors:
        err.print(f"[yellow]backend error[/] {escape(str(error))}")
    for fault in result.plugin_errors:
        err.print(f"[yellow]plugin error[/] {escape(str(fault))}")


def _fail(err: Console, message: str, code: int) -> Any:
    err.print(f"[red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)
