"""``samplehooks sample "PROMPT"``: sample one answer and show every attempt.

The answer chosen is printed on stdout (alone, so it can be piped); the per-attempt table
and the summary go to stderr. With ``--json`` the whole result is printed on stdout as one
JSON object instead. The prompt is read from stdin when it is ``-``, or when it is left out
and stdin is not a terminal. Exit status: 0 when an answer met every requirement, 1 when
none did (or the backend failed), 2 for a mistake in the command line.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

import anyio
import typer
from rich.console import Console

from sampling_core.cli.logs import logs_to_stderr
from sampling_core.cli.readable import fail
from sampling_core.cli.sample_output import print_report, result_as_dict
from sampling_core.errors import SamplehooksError
from sampling_core.requirements import COUNTED, REQUIREMENTS_BY_NAME, Requirement
from sampling_core.results import SamplingResult
from sampling_core.sampler import Sampler
from sampling_core.strategies import STRATEGIES_BY_NAME, Strategy

__all__ = ["parse_requirement", "sample_command"]

REQUIRE_HELP = (
    "A requirement, repeatable: regex:PATTERN, contains:TEXT, not-contains:TEXT, "
    "max-words:N, min-words:N, max-chars:N, json."
)


class StrategyName(StrEnum):
    """The strategies the command offers."""

    rejection = "rejection"
    repair = "repair"
    multiturn = "multiturn"
    best_of_n = "best-of-n"
    majority = "majority"


class SelectionName(StrEnum):
    """Which passing attempt is picked."""

    first = "first"
    ordered = "ordered"


class BackendName(StrEnum):
    """The backends the command offers."""

    local = "local"
    openai = "openai"
    scripted = "scripted"


class UsageError(ValueError):
    """A mistake in the command line (exit status 2)."""


_ALIASES = {"regex": "matches", "json": "is_json"}


def parse_requirement(spec: str) -> Requirement:
    """Turn one ``--require`` spec into a :class:`Requirement`; ``UsageError`` if malformed."""
    kind, sep, argument = spec.partition(":")
    kind = kind.strip().lower()
    name = _ALIASES.get(kind, kind.replace("-", "_"))
    if name == "is_json":
        if sep and argument:
            raise UsageError(f"--require json takes no argument, got {spec!r}")
        return REQUIREMENTS_BY_NAME[name]()
    if not sep or not argument:
        raise UsageError(f"--require {spec!r}: expected KIND:VALUE (see --help), or json")
    build = REQUIREMENTS_BY_NAME.get(name)
    if build is None:
        raise UsageError(
            f"--require {spec!r}: unknown kind {kind!r}; use regex, contains, not-contains, "
            "max-words, min-words, max-chars or json"
        )
    if name in COUNTED:
        number = int(argument) if argument.strip().isdigit() else 0
        if number < 1:
            raise UsageError(f"--require {spec!r}: {kind} needs a whole number >= 1")
        return build(number)
    try:
        return build(argument)
    except (re.error, ValueError) as exc:
        raise UsageError(f"--require {spec!r}: not a valid regular expression: {exc}") from None


def build_strategy(name: StrategyName) -> Strategy:
    """The strategy named on the command line."""
    return STRATEGIES_BY_NAME[name.value.replace("-", "_")]()


def build_backend(
    name: BackendName,
    *,
    model: str | None,
    base_url: str | None,
    concurrency: int,
    replies: Sequence[str],
    api_key_env: str,
) -> Any:
    """The backend named on the command line (real ones are imported only when asked for)."""
    if name is BackendName.scripted:
        from sampling_core.backends import ScriptedBackend

        if not replies:
            raise UsageError("--backend scripted needs at least one --reply TEXT")
        return ScriptedBackend(list(replies))
    if replies:
        raise UsageError("--reply is only for --backend scripted")
    if name is BackendName.local:
        from sampling_core.backends.local import LocalBackend

        if base_url:
            raise UsageError("--base-url is for --backend openai; the local backend serves itself")
        return LocalBackend(model, parallel=concurrency)
    from sampling_core.backends.openai_compat import OpenAIBackend

    if not model:
        raise UsageError("--backend openai needs --model NAME")
    return OpenAIBackend(model, base_url=base_url, api_key_env=api_key_env)


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
    strategy: StrategyName = typer.Option(
        StrategyName.rejection,
        "--strategy",
        "-s",
        metavar="NAME",
        help="How failed attempts are repaired: rejection, repair, multiturn, best-of-n, majority.",
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
        metavar="NAME",
        help="A plugin to enable by name (repeatable), e.g. tracing.",
        show_default=False,
    ),
    backend: BackendName = typer.Option(
        BackendName.local,
        "--backend",
        "-b",
        metavar="KIND",
        help="local (embedded model), openai, scripted.",
    ),
    model: str | None = typer.Option(
        None, "--model", "-m", metavar="NAME", help="The model name (openai) or .gguf path (local)."
    ),
    base_url: str | None = typer.Option(
        None, "--base-url", metavar="URL", help="An OpenAI-compatible server's base URL (openai)."
    ),
    api_key_env: str = typer.Option(
        "OPENAI_API_KEY",
        "--api-key-env",
        metavar="VAR",
        help="The variable holding the API key (openai).",
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
    as_json: bool = typer.Option(
        False, "--json", help="Print the whole result as JSON on stdout (no table)."
    ),
) -> None:
    """Sample an answer to PROMPT that meets every --require, and show each attempt."""
    err = Console(stderr=True, highlight=False)
    text = _read_prompt(prompt)
    try:
        requirements = [parse_requirement(spec) for spec in require]
        chosen = build_backend(
            backend,
            model=model,
            base_url=base_url,
            concurrency=max(concurrency, 1),
            replies=reply,
            api_key_env=api_key_env,
        )
        sampler = Sampler(chosen, plugins=plugin)
    # LookupError: an unknown plugin; ValueError: a value a backend refuses (--api-key-env)
    except (UsageError, SamplehooksError, LookupError, ValueError) as exc:
        fail(str(exc))
    options: dict[str, Any] = {"max_tokens": max_tokens}
    if temperature is not None:
        options["temperature"] = temperature

    async def run() -> SamplingResult:
        async with sampler:  # stops the local model's server, closes HTTP connections
            return await sampler.sample(
                text,
                requirements=requirements,
                strategy=build_strategy(strategy),
                loop_budget=loop_budget,
                concurrency_budget=concurrency,
                seed=seed,
                selection=selection.value,  # type: ignore[arg-type]
                options=options,
            )

    # stdout carries the answer alone; log lines (e.g. from --plugin tracing) go to stderr.
    try:
        with logs_to_stderr():
            result = anyio.run(run)
    except ValueError as exc:  # a bad budget (BudgetError) and the like
        fail(str(exc))
    except SamplehooksError as exc:  # the backend failed (a missing model, a refused key)
        fail(str(exc), 1)
    except Exception as exc:
        fail(f"{type(exc).__name__}: {exc}", 1)
    if as_json:
        sys.stdout.write(json.dumps(result_as_dict(result), indent=2) + "\n")
    else:
        print_report(err, result)
        if result.text is not None:
            sys.stdout.write(result.text.strip() + "\n")
    raise typer.Exit(0 if result.success else 1)


def _read_prompt(prompt: str | None) -> str:
    """The prompt argument, or stdin when it is ``-`` or absent and stdin is not a terminal."""
    if prompt is not None and prompt != "-":
        return prompt
    if prompt is None and sys.stdin.isatty():
        fail("give a PROMPT, or '-' to read it from stdin (see 'samplehooks sample --help')")
    try:
        text = sys.stdin.read()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"cannot read the prompt from stdin: {exc}")
    if not text.strip():
        fail("the prompt read from stdin is empty")
    return text.rstrip("\n")
