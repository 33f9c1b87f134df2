"""``samplehooks sample "PROMPT"``: sample one answer and show every attempt.

The answer chosen is printed on stdout (alone, so it can be piped); the per-attempt table
and the summary go to stderr. With ``--json`` the whole result is printed on stdout as one
JSON object instead. The prompt is read from stdin when it is ``-``, or when it is left out
and stdin is not a terminal. Exit status: 0 when an answer met every requirement, 1 when
none did (or the backend failed), 2 for a mistake in the command line.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import Any

import anyio
import typer
from rich.console import Console

from sampling_core.cli.kind_args import (
    UsageError,
    backend_arg,
    plugin_arg,
    requirement_arg,
    strategy_arg,
)
from sampling_core.cli.logs import logs_to_stderr
from sampling_core.cli.readable import fail
from sampling_core.cli.sample_output import print_report, result_as_dict
from sampling_core.engine.launch import DEFAULT_STAGGER_S
from sampling_core.engine.results import SamplingResult
from sampling_core.engine.sampler import Sampler
from sampling_core.errors import SamplehooksError, exception_text
from sampling_core.kinds import collect_kinds
from sampling_core.redaction import json_text, printable
from sampling_core.requirements.formats import MAX_SCHEMA_DEPTH, schema_validator

__all__ = ["sample_command"]

REQUIRE_HELP = (
    "A requirement, repeatable: KIND:VALUE of any requirement kind (see `samplehooks plugins`), "
    "e.g. regex:PATTERN, contains:TEXT, not-contains:TEXT, max-words:N, min-words:N, "
    "max-chars:N, json."
)


class SelectionName(StrEnum):
    """Which passing attempt is picked."""

    first = "first"
    ordered = "ordered"


class LaunchName(StrEnum):
    """When the subsamples start."""

    all = "all"
    staggered = "staggered"
    on_failure = "on_failure"


def sample_command(
    prompt: str | None = typer.Argument(
        None,
        metavar="PROMPT",
        help="The prompt (one user message); '-' or left out with a pipe: read from stdin.",
        show_default=False,
    ),
    require: list[str] = typer.Option(
        [], "--require", "-r", metavar="KIND:VALUE", help=REQUIRE_HELP, show_default=False
    ),
    loop_budget: int = typer.Option(
        3, "--loop-budget", "-l", metavar="N", help="Attempts per subsample."
    ),
    concurrency: int = typer.Option(
        1,
        "--concurrency",
        "-c",
        metavar="N",
        help="Subsamples run at once (and local model slots).",
    ),
    strategy: str = typer.Option(
        "rejection",
        "--strategy",
        "-s",
        metavar="NAME[:K=V,...]",
        autocompletion=lambda incomplete: _kind_names("strategy", incomplete),
        help="How failed attempts are repaired: NAME or NAME:k=v,... (rejection, repair, "
        "multiturn, best-of-n, majority, or one a plugin adds).",
    ),
    selection: SelectionName = typer.Option(
        SelectionName.first,
        "--selection",
        metavar="NAME",
        help="Which passing attempt wins: first (to finish) or ordered (first in attempt, "
        "subsample order: the same answer on every run with --seed).",
    ),
    plugin: list[str] = typer.Option(
        [],
        "--plugin",
        "-p",
        metavar="NAME[:K=V,...]",
        help="A plugin to enable (repeatable): NAME or NAME:k=v,... with its options, "
        "e.g. budget_guard:max_tokens=5000.",
        show_default=False,
    ),
    backend: str = typer.Option(
        "local",
        "--backend",
        "-b",
        metavar="KIND",
        autocompletion=lambda incomplete: _kind_names("backend", incomplete),
        help="The backend kind: local (embedded model), openai, scripted, or one a plugin adds.",
    ),
    backend_option: list[str] = typer.Option(
        [],
        "--backend-option",
        "-B",
        metavar="NAME=VALUE",
        help="An option of the backend kind (repeatable).",
        show_default=False,
    ),
    model: str | None = typer.Option(
        None, "--model", "-m", metavar="NAME", help="The model name (openai) or .gguf path (local)."
    ),
    base_url: str | None = typer.Option(
        None, "--base-url", metavar="URL", help="An OpenAI-compatible server's base URL (openai)."
    ),
    api_key_env: str | None = typer.Option(
        None,
        "--api-key-env",
        metavar="VAR",
        help="The variable holding the API key (openai; default OPENAI_API_KEY).",
    ),
    max_tokens: int = typer.Option(
        64, "--max-tokens", metavar="N", help="The most tokens per answer."
    ),
    temperature: float | None = typer.Option(
        None, "--temperature", metavar="T", help="Sampling temperature."
    ),
    seed: int | None = typer.Option(
        None, "--seed", metavar="N", help="Derive a seed for every attempt."
    ),
    reply: list[str] = typer.Option(
        [],
        "--reply",
        metavar="TEXT",
        help="A canned answer for --backend scripted (repeatable, in order).",
        show_default=False,
    ),
    early_stop: bool = typer.Option(
        True,
        "--early-stop/--no-early-stop",
        help="Stop a generation as soon as the text so far fails a requirement that can "
        "tell (max-words, max-chars, not-contains): fewer tokens, same answers.",
    ),
    launch: LaunchName = typer.Option(
        LaunchName.all,
        "--launch",
        metavar="POLICY",
        help="When subsamples start: all (at once), staggered (one every --stagger-s "
        "seconds, unless decided by then) or on_failure (the next when one fails).",
    ),
    stagger_s: float = typer.Option(
        DEFAULT_STAGGER_S,
        "--stagger-s",
        metavar="SECONDS",
        help="With --launch staggered: seconds between two subsamples' starts.",
    ),
    format_file: Path | None = typer.Option(
        None,
        "--format",
        metavar="FILE.json",
        help="A JSON schema the answer must match (checked; local and OpenAI-compatible "
        "backends also constrain their decoding to it).",
        show_default=False,
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the whole result as JSON on stdout (no table)."
    ),
    cache: Path | None = typer.Option(
        None,
        "--cache",
        metavar="PATH",
        help="A response cache (SQLite file): a call asked before (the same request body, "
        "seed included, to the same model and server) is answered from it, marked cached.",
        show_default=False,
    ),
) -> None:
    """Sample an answer to PROMPT that meets every --require, and show each attempt."""
    err = Console(stderr=True, highlight=False)
    text = _read_prompt(prompt)
    schema = _read_schema(format_file) if format_file is not None else None
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
        sampler = Sampler(chosen, plugins=plugins, cache=cache)
    # LookupError: an unknown plugin; ValueError: a value a backend refuses (--api-key-env)
    except (UsageError, SamplehooksError, LookupError, ValueError) as exc:
        fail(exception_text(exc))
    options: dict[str, Any] = {"max_tokens": max_tokens}
    if temperature is not None:
        options["temperature"] = temperature

    async def run() -> SamplingResult:
        async with sampler:  # stops the local model's server, closes HTTP connections
            return await sampler.sample(
                text,
                requirements=requirements,
                strategy=chosen_strategy,
                loop_budget=loop_budget,
                concurrency_budget=concurrency,
                seed=seed,
                selection=selection.value,  # type: ignore[arg-type]
                options=options,
                format=schema,
                early_stop=early_stop,
                launch=launch.value,  # type: ignore[arg-type]
                stagger_s=stagger_s,
            )

    # stdout carries the answer alone; log lines (e.g. from --plugin tracing) go to stderr.
    try:
        with logs_to_stderr():
            result = anyio.run(run)
    except ValueError as exc:  # a bad budget (BudgetError) and the like
        fail(exception_text(exc))
    except SamplehooksError as exc:  # the backend failed (a missing model, a refused key)
        fail(exception_text(exc), 1)
    except Exception as exc:
        fail(f"{type(exc).__name__}: {exception_text(exc)}", 1)
    if as_json:
        sys.stdout.write(json_text(result_as_dict(result), indent=2) + "\n")
    else:
        print_report(err, result)
        if result.text is not None:
            sys.stdout.write(printable(result.text.strip(), lines=True) + "\n")
    raise typer.Exit(0 if result.success else 1)


def _kind_names(area: Any, incomplete: str) -> list[str]:
    """Shell completion: the installed kinds of ``area`` that start with ``incomplete``."""
    return [name for name in collect_kinds().names(area) if name.startswith(incomplete)]


def _read_schema(path: Path) -> dict[str, Any]:
    """The JSON schema in ``path`` (a JSON object), or one line saying what is wrong."""
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        fail(f"--format: cannot read {path}: {exc.strerror or exception_text(exc)}")
    except ValueError as exc:
        fail(f"--format: {path} is not JSON: {exception_text(exc)}")
    except RecursionError:
        fail(f"--format: {path} is nested too deeply (at most {MAX_SCHEMA_DEPTH} levels)")
    if not isinstance(schema, dict):
        fail(f"--format: {path} must hold a JSON schema (an object), not {type(schema).__name__}")
    try:
        schema_validator(schema)
    except ValueError as exc:
        fail(f"--format: {path}: {exception_text(exc)}")
    return schema


def _read_prompt(prompt: str | None) -> str:
    """The prompt argument, or stdin when it is ``-`` or absent and stdin is not a terminal."""
    if prompt is not None and prompt != "-":
        return prompt
    if prompt is None and sys.stdin.isatty():
        fail("give a PROMPT, or '-' to read it from stdin (see 'samplehooks sample --help')")
    try:
        text = sys.stdin.read()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read the prompt from stdin: {exception_text(exc)}")
    if not text.strip():
        fail("the prompt read from stdin is empty")
    return text.rstrip("\n")
