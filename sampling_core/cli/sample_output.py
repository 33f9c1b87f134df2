"""What ``samplehooks sample`` shows: the attempts table, the summary line, the JSON form."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from sampling_core.engine.results import SamplingResult
from sampling_core.redaction import printable
from sampling_core.runs.store.record import AttemptEntry

__all__ = ["attempts_table", "print_report", "result_as_dict"]

_KEY_COLUMNS = ("iteration", "subsample", "attempt", "passed", "latency", "tokens")
_ANSWER_MIN = 8  # below this the answer column is a stub; the key columns still fit


def attempts_table(result: SamplingResult, width: int = 80) -> Table:
    """One row per completed attempt, in completion order, fitted to ``width`` columns.

    The key columns (iteration, subsample, attempt, passed, latency, tokens) always keep
    their full width; the answer column takes what is left and ends in an ellipsis when
    the answer is longer.
    """
    rows = []
    for a in sorted(result.attempts, key=lambda a: a.sequence):
        usage = a.generation.usage
        rows.append(
            (
                str(a.iteration),
                str(a.subsample_index),
                str(a.attempt),
                "yes" if a.passed else "no",
                f"{a.latency_s * 1000:.0f} ms",
                "cached"
                if a.provenance.cached
                else f"{_count(usage.input_tokens)}/{_count(usage.output_tokens)}",
                ("✂ " if not a.provenance.whole else "")
                + printable(a.text.strip().replace("\n", " ")),
            )
        )
    widths = [
        max([len(header), *(len(row[i]) for row in rows)]) for i, header in enumerate(_KEY_COLUMNS)
    ]
    # 7 columns padded by one space a side, 6 separators and 2 edges (blank in SIMPLE_HEAD)
    columns = len(widths) + 1
    answer_width = max(_ANSWER_MIN, width - sum(widths) - 2 * columns - (columns - 1) - 2)
    table = Table(box=box.SIMPLE_HEAD, title="attempts", title_justify="left")
    for header, column_width in zip(_KEY_COLUMNS, widths, strict=True):
        justify = "center" if header == "passed" else "right"
        table.add_column(header, justify=justify, no_wrap=True, min_width=column_width)
    table.add_column("answer", no_wrap=True, max_width=answer_width)
    for *key, answer in rows:
        passed = "[green]yes[/]" if key[3] == "yes" else "[red]no[/]"
        cut = Text(answer)
        cut.truncate(answer_width, overflow="ellipsis")
        table.add_row(*key[:3], passed, *key[4:], cut)
    return table


def print_report(err: Console, result: SamplingResult) -> None:
    """The attempts table and a one-line summary (then any backend or plugin errors)."""
    err.print(attempts_table(result, err.width))
    usage = result.usage
    verdict = "[green]passed[/]" if result.success else "[red]no answer met every requirement[/]"
    stopped = sum(1 for a in result.attempts if a.stopped_early)
    saved = f"stopped early: {stopped} · " if stopped else ""
    if result.not_started:
        saved += f"never started: {result.not_started} · "
    err.print(
        f"{verdict} · stop: {result.stop_reason} · attempts: {result.iterations_used} · "
        f"{saved}cancelled: {result.cancelled} · tokens: {_count(usage.input_tokens)} in / "
        f"{_count(usage.output_tokens)} out · {result.elapsed_s:.2f} s",
        soft_wrap=True,
    )
    if result.cached_calls:
        saved = result.cached_usage
        err.print(
            f"cached: {result.cached_calls} calls answered from the cache "
            f"({_count(saved.input_tokens)} in / {_count(saved.output_tokens)} out not spent again)"
        )
    for error in result.errors:
        err.print(f"[yellow]backend error[/] {escape(printable(str(error)))}")
    for fault in result.plugin_errors:
        err.print(f"[yellow]plugin error[/] {escape(printable(str(fault)))}")


def result_as_dict(result: SamplingResult) -> dict[str, Any]:
    """The result as plain JSON data (what ``sample --json`` prints)."""
    prompt = next((a.messages for a in result.attempts if a.attempt == 1), None)
    return {
        "success": result.success,
        "text": result.text,
        "stop_reason": result.stop_reason,
        "failure_reason": result.failure_reason,
        "sampling_id": result.sampling_id,
        "strategy": result.strategy_name,
        "loop_budget": result.loop_budget,
        "concurrency_budget": result.concurrency_budget,
        "iterations_used": result.iterations_used,
        "cancelled": result.cancelled,
        "cancelled_because": result.cancelled_because,
        "not_started": result.not_started,
        "elapsed_s": result.elapsed_s,
        "usage": {
            "input_tokens": result.usage.input_tokens,
            "output_tokens": result.usage.output_tokens,
            "cached": {
                "calls": result.cached_calls,
                "input_tokens": result.cached_usage.input_tokens,
                "output_tokens": result.cached_usage.output_tokens,
            },
            "cancelled": {
                "input_tokens": result.cancelled_usage.input_tokens,
                "output_tokens": result.cancelled_usage.output_tokens,
            },
        },
        "attempts": [  # the one JSON shape of an attempt: as in a record's attempts.each
            AttemptEntry.of_attempt(a, prompt).as_json()
            for a in sorted(result.attempts, key=lambda a: a.sequence)
        ],
        "errors": [str(error) for error in result.errors],
        "plugin_errors": [str(fault) for fault in result.plugin_errors],
    }


def _count(tokens: int | None) -> str:
    """A token count, or ``unknown`` when the backend did not report it (never 0)."""
    return "unknown" if tokens is None else str(tokens)
