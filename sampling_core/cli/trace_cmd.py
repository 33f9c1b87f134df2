"""``samplehooks trace show FILE``: a recorded event file as a per-call timeline.

The file is what the ``recorder`` plugin writes: one JSON line per hook event, read and
interpreted by :mod:`sampling_core.events.attempts` (as ``samplehooks view`` does), twice:
once to check every line (a bad one is refused before anything is printed), once to print
each call as it ends, so memory holds the calls in flight, not the file (with ``--text``
the calls are held with their texts, which it prints whole). For every
``sample()`` call in it, the command prints the call's settings and outcome and one row
per attempt, in the order attempts finished: time since the call started, iteration,
subsample, attempt, sequence, passed, backend latency, tokens, and a note for attempts
that ended in a backend error, were stopped early by a prefix check, were cancelled (with
the chunks they had streamed), or needed transport retries. With ``--text``, each attempt's
whole text follows: from the events when the recorder captured content, else from the
run's ``texts.jsonl`` when FILE is a run directory's ``events.jsonl`` (every run keeps each
attempt's whole text there).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sampling_core.cli.readable import ReadableCommand, ReadableGroup, fail
from sampling_core.errors import exception_text
from sampling_core.events.attempts import RecordedAttempt, RecordedCall, iter_calls
from sampling_core.redaction import printable
from sampling_core.runs.errors import RunError
from sampling_core.runs.store.kept_texts import TEXTS_FILE, texts_of_calls

__all__ = ["timeline_as_dict", "trace_app"]

trace_app = typer.Typer(
    name="trace",
    help="Read files written by the recorder plugin.",
    cls=ReadableGroup,
    no_args_is_help=True,
    add_completion=False,
)


@trace_app.callback()
def _trace() -> None:
    """Read files written by the recorder plugin."""


_SHOWN = (
    "subsample_index",
    "attempt",
    "iteration",
    "started",
    "finished",
    "sequence",
    "passed",
    "latency_s",
    "input_tokens",
    "output_tokens",
    "retries",
    "outcome",
    "stopped_early",
    "chunks",
    "provenance",
)
"""An attempt's fields in ``--json`` (``t_s`` follows)."""


@trace_app.command("show", cls=ReadableCommand)
def show_command(
    file: Path = typer.Argument(
        ..., metavar="FILE", help="A JSONL file written by the recorder plugin."
    ),
    call: str | None = typer.Option(
        None, "--call", metavar="ID", help="Show only the calls whose sampling_id starts with this."
    ),
    as_json: bool = typer.Option(
        False, "--json", help="Print the calls and their attempts as a JSON list instead."
    ),
    show_text: bool = typer.Option(
        False,
        "--text",
        help="Show each attempt's whole text (from the events, or from the run's texts.jsonl "
        "beside FILE).",
    ),
) -> None:
    """Print a per-call timeline: iteration, subsample, attempt, sequence, passed, latency."""
    keep = None if call is None else _starting_with(call)
    try:  # the whole file is checked before anything is printed, then read again to print
        found = sum(
            1
            for _ in iter_calls(file, on_note=lambda n: _note_line(f"{file}: {n}"), keep_call=keep)
        )
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    except ValueError as exc:  # EventFileError: one line naming the line and the field
        fail(f"{file}: {exception_text(exc)}")
    if call is not None and not found:
        fail(f"{file}: no call's sampling_id starts with {call!r}")
    try:
        timelines: Iterable[RecordedCall] = iter_calls(file, keep_call=keep)  # as they end
        if show_text:  # the texts are printed whole: the calls are held with them
            timelines = list(timelines)
            _add_kept_texts(file, timelines)
        if as_json:
            _echo_json_list(timeline_as_dict(t, show_text) for t in timelines)
            return
        # Piped output gets a width that fits every column (rich assumes 80 otherwise).
        console = Console() if sys.stdout.isatty() else Console(width=120)
        if not found:
            console.print(f"{escape(str(file))}: no calls recorded.", highlight=False)
            return
        for timeline in timelines:
            _print_call(console, timeline)
            if show_text:
                _print_texts(console, timeline)
    except (OSError, ValueError) as exc:  # the file changed between the two readings
        fail(f"cannot read {file} (it changed while it was read): {exception_text(exc)}")


def _echo_json_list(items: Iterable[Any]) -> None:
    """``json.dumps(list(items), indent=2)``, echoed an item at a time."""
    count = 0
    for count, item in enumerate(items, start=1):
        text = json.dumps(item, indent=2).replace("\n", "\n  ")
        typer.echo(f"{'[' if count == 1 else ','}\n  {text}", nl=False)
    typer.echo("\n]" if count else "[]")


def _add_kept_texts(file: Path, timelines: list[RecordedCall]) -> None:
    """Fill in the texts the events left out from the run's ``texts.jsonl`` beside ``file``."""
    wanted = {t.sampling_id for t in timelines if any(r.text is None for r in t.rows())}
    kept = file.parent / TEXTS_FILE
    if not wanted or not kept.is_file():
        return
    damaged: list[int] = []
    try:
        found = texts_of_calls(kept, wanted, on_bad=lambda number, why: damaged.append(number))
    except RunError as exc:  # the file cannot be read
        fail(exception_text(exc))
    for timeline in timelines:
        texts = found.get(timeline.sampling_id)
        if texts is None:  # no line of texts.jsonl is this call's: say why
            timeline.texts_note = _no_texts(kept, damaged)
            continue
        for row in timeline.rows():
            whole = texts.get((row.subsample_index, row.attempt))
            if row.text is None and whole is not None:
                row.text = whole["text"]


def _no_texts(kept: Path, damaged: list[int]) -> str:
    """Why a call's texts are not shown although ``kept`` (``texts.jsonl``) is there."""
    if damaged:
        lines = ", ".join(map(str, damaged[:5])) + (", ..." if len(damaged) > 5 else "")
        return (
            f"(not readable: {kept} has {len(damaged)} damaged line(s) (line {lines}); this "
            "call's texts are not on any readable line)"
        )
    return f"(not kept: {kept} holds no line for this call)"


NO_TEXTS = "(not kept: the recorder left content out, and no texts.jsonl beside the file)"


def _print_texts(console: Console, timeline: RecordedCall) -> None:
    for row in timeline.rows():
        if row.state != "completed":
            continue
        console.print(
            f"  [bold]subsample {row.subsample_index}, attempt {row.attempt}[/]",
            highlight=False,
        )
        shown = timeline.texts_note or NO_TEXTS
        text = printable(row.text, lines=True) if row.text is not None else shown
        console.print(escape(text), highlight=False)


def _starting_with(prefix: str) -> Callable[[str], bool]:
    return lambda sampling_id: sampling_id.startswith(prefix)


def _note_line(message: str) -> None:
    typer.echo(f"samplehooks: note: {message}", err=True)


def timeline_as_dict(timeline: RecordedCall, text: bool = False) -> dict[str, Any]:
    """One call as JSON data: its start and end payloads and its attempts, as shown (with
    ``text``, each attempt's text too)."""
    shown = (*_SHOWN, "text") if text else _SHOWN
    return {
        "sampling_id": timeline.sampling_id,
        "start": timeline.start,
        "end": timeline.end,
        "attempts": [
            {
                **{name: getattr(row, name) for name in shown},
                "t_s": _since(row.finished, timeline.started_at),
            }
            for row in timeline.rows()
        ],
    }


def _since(when: float | None, origin: float | None) -> float | None:
    return None if when is None or origin is None else when - origin


def _print_call(console: Console, timeline: RecordedCall) -> None:
    start, end = timeline.start or {}, timeline.end or {}
    title = f"call {timeline.sampling_id}"
    if start or end:
        strategy = start.get("strategy_name") or end.get("strategy_name") or "?"
        loop_budget = end.get("loop_budget", start.get("loop_budget", "?"))
        concurrency = end.get("concurrency_budget", start.get("concurrency_budget", "?"))
        title += f"  {strategy}  loop_budget={loop_budget} concurrency_budget={concurrency}"
    table = Table(title=escape(printable(title)), title_justify="left", box=box.SIMPLE_HEAD)
    for header in ("t (ms)", "iteration", "subsample", "attempt", "sequence", "passed"):
        table.add_column(header, justify="right")
    table.add_column("latency (ms)", justify="right")
    table.add_column("tokens in/out", justify="right")
    table.add_column("note")
    for row in timeline.rows():
        table.add_row(
            _ms(row.finished, timeline.started_at),
            str(row.iteration),
            str(row.subsample_index),
            str(row.attempt),
            "-" if row.sequence is None else str(row.sequence),
            _passed(row.passed),
            "-" if row.latency_s is None else f"{row.latency_s * 1000:.1f}",
            _tokens(row.input_tokens, row.output_tokens),
            escape(printable(_note(row))),
        )
    console.print(table)
    if end:
        console.print(
            f"  stop_reason={end.get('stop_reason')} success={end.get('success')} "
            f"iterations_used={end.get('iterations_used')} cancelled={end.get('cancelled')} "
            f"not_started={end.get('not_started', 0)} "
            f"elapsed={float(end.get('elapsed_s') or 0.0) * 1000:.1f} ms",
            highlight=False,
        )
    else:
        console.print("  (no sampling_loop_end recorded: the call did not finish)")


def _note(row: RecordedAttempt) -> str:
    notes = [] if row.outcome == "completed" else [row.outcome]
    seen = row.provenance or {}
    if row.stopped_early:
        by = seen.get("stopped_by")
        note = "stopped early" + (f" by {', '.join(map(str, by))}" if isinstance(by, list) else "")
        notes.append(f"{note} ({row.chunks} chunks)" if row.chunks else note)
    elif row.state == "cancelled" and row.chunks:
        notes[-1] += f" after {row.chunks} chunks"
    if seen.get("cached"):
        notes.append("cached")
    if isinstance(seen.get("answered_by"), str):
        notes.append(f"answered by {seen['answered_by']}")
    if row.retries:
        notes.append(f"{row.retries} transport {'retry' if row.retries == 1 else 'retries'}")
    return ", ".join(notes)


def _ms(when: float | None, origin: float | None) -> str:
    if when is None or origin is None:
        return "-"
    return f"{(when - origin) * 1000:.1f}"


def _passed(passed: bool | None) -> str:
    if passed is None:
        return "-"
    return "[green]yes[/]" if passed else "[red]no[/]"


def _tokens(tokens_in: int | None, tokens_out: int | None) -> str:
    if tokens_in is None and tokens_out is None:
        return "-"
    return f"{tokens_in or 0}/{tokens_out or 0}"
