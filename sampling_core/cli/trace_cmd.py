"""``samplehooks trace show FILE``: a recorded event file as a per-call timeline.

The file is what the ``recorder`` plugin writes: one JSON line per hook event. For every
``sample()`` call in it, the command prints the call's settings and outcome and one row
per attempt, in the order attempts finished: time since the call started, iteration,
subsample, attempt, sequence, passed, backend latency, tokens, and a note for attempts
that ended in a backend error, were cancelled, or needed transport retries.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from sampling_core.cli.readable import ReadableCommand, ReadableGroup, fail
from sampling_core.events import read_events

__all__ = ["AttemptRow", "CallTimeline", "build_timelines", "timeline_as_dict", "trace_app"]

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


@dataclass(slots=True)
class AttemptRow:
    """One attempt of a call, as the recorded events describe it."""

    subsample_index: int
    attempt: int
    iteration: int
    started: float | None = None  # wall time of the attempt's first backend call
    finished: float | None = None  # wall time of its iteration (or final error) event
    sequence: int | None = None
    passed: bool | None = None
    latency_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    retries: int = 0
    outcome: str = "in flight"  # "completed", "error: Type", "cancelled" or "in flight"


@dataclass(slots=True)
class CallTimeline:
    """One ``sample()`` call: its start and end events, and its attempts."""

    sampling_id: str
    start: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    started_at: float | None = None
    attempts: dict[tuple[int, int], AttemptRow] = field(default_factory=dict)

    def rows(self) -> list[AttemptRow]:
        """The attempts in the order they finished; unfinished ones last."""
        never = float("inf")
        return sorted(
            self.attempts.values(),
            key=lambda r: (
                r.finished if r.finished is not None else never,
                r.sequence or 0,
                r.subsample_index,
                r.attempt,
            ),
        )


def build_timelines(events: list[dict[str, Any]]) -> list[CallTimeline]:
    """Group recorded events by call, in the order calls first appear."""
    calls: dict[str, CallTimeline] = {}
    for event in events:
        hook, payload, when = event["hook"], event["payload"], event.get("time")
        sid = str(payload.get("sampling_id", "?"))
        call = calls.get(sid)
        if call is None:
            call = calls[sid] = CallTimeline(sid)
        if call.started_at is None and isinstance(when, int | float):
            call.started_at = float(when)
        if hook == "sampling_loop_start":
            call.start = payload
            if isinstance(when, int | float):
                call.started_at = float(when)
        elif hook == "sampling_loop_end":
            _number(payload.get("elapsed_s"), "elapsed_s")
            call.end = payload
            for row in call.attempts.values():
                if row.outcome == "in flight":
                    row.outcome = "cancelled"
        elif "subsample_index" in payload and "attempt" in payload:
            _attempt_event(call, hook, payload, when)
    return list(calls.values())


def _attempt_event(call: CallTimeline, hook: str, payload: dict[str, Any], when: Any) -> None:
    index = _integer(payload["subsample_index"], "subsample_index")
    number = _integer(payload["attempt"], "attempt")
    row = call.attempts.get((index, number))
    if row is None:
        row = call.attempts[(index, number)] = AttemptRow(
            index, number, _integer(payload.get("iteration", 0), "iteration")
        )
    when = float(when) if isinstance(when, int | float) else None
    if hook == "generation_pre_call":
        if row.started is None:
            row.started = when
        row.retries = max(row.retries, _integer(payload.get("retry") or 0, "retry"))
    elif hook == "generation_post_call":
        usage = _mapping(_mapping(payload.get("generation"), "generation").get("usage"), "usage")
        row.latency_s = _number(payload.get("latency_s"), "latency_s")
        row.input_tokens = _integer(usage.get("input_tokens"), "input_tokens", None)
        row.output_tokens = _integer(usage.get("output_tokens"), "output_tokens", None)
    elif hook == "sampling_iteration":
        usage = _mapping(payload.get("usage"), "usage")
        row.sequence = _integer(payload.get("sequence"), "sequence", None)
        passed = payload.get("passed")
        if passed is not None and not isinstance(passed, bool):
            raise ValueError(f"passed must be true or false, got {passed!r}")
        row.passed = passed
        row.latency_s = _number(payload.get("latency_s", row.latency_s), "latency_s")
        row.input_tokens = _integer(
            usage.get("input_tokens", row.input_tokens), "input_tokens", None
        )
        row.output_tokens = _integer(
            usage.get("output_tokens", row.output_tokens), "output_tokens", None
        )
        row.finished = when
        row.outcome = "completed"
    elif hook == "generation_error" and not payload.get("will_retry"):
        row.finished = when
        row.outcome = f"error: {payload.get('error_type', '?')}"


_REQUIRED: Any = object()


def _integer(value: Any, name: str, missing: Any = _REQUIRED) -> Any:
    """``value`` if it is an int (``missing`` stands for ``None`` when allowed)."""
    if value is None and missing is not _REQUIRED:
        return missing
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return value


def _number(value: Any, name: str) -> float | None:
    """``value`` as a float, or ``None`` when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number, got {value!r}")
    return float(value)


def _mapping(value: Any, name: str) -> dict[str, Any]:
    """``value`` if it is a JSON object (``{}`` when absent)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be an object, got {value!r}")
    return value


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
) -> None:
    """Print a per-call timeline: iteration, subsample, attempt, sequence, passed, latency."""
    try:
        events = read_events(file, on_note=lambda note: _note_line(f"{file}: {note}"))
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    except (ValueError, UnicodeDecodeError) as exc:
        fail(f"{file}: {exc}")
    try:
        timelines = build_timelines(events)
    except (KeyError, TypeError, ValueError) as exc:
        fail(f"{file}: an event does not look like a recorded hook event ({exc!r})")
    if call is not None:
        timelines = [t for t in timelines if t.sampling_id.startswith(call)]
        if not timelines:
            fail(f"{file}: no call's sampling_id starts with {call!r}")
    if as_json:
        typer.echo(json.dumps([timeline_as_dict(t) for t in timelines], indent=2))
        return
    # Piped output gets a width that fits every column (rich assumes 80 otherwise).
    console = Console() if sys.stdout.isatty() else Console(width=120)
    if not timelines:
        console.print(f"{escape(str(file))}: no calls recorded.", highlight=False)
        return
    for timeline in timelines:
        _print_call(console, timeline)


def _note_line(message: str) -> None:
    typer.echo(f"samplehooks: note: {message}", err=True)


def timeline_as_dict(timeline: CallTimeline) -> dict[str, Any]:
    """One call as JSON data: its start and end payloads and its attempts, as shown."""
    return {
        "sampling_id": timeline.sampling_id,
        "start": timeline.start,
        "end": timeline.end,
        "attempts": [
            {**asdict(row), "t_s": _since(row.finished, timeline.started_at)}
            for row in timeline.rows()
        ],
    }


def _since(when: float | None, origin: float | None) -> float | None:
    return None if when is None or origin is None else when - origin


def _print_call(console: Console, timeline: CallTimeline) -> None:
    start, end = timeline.start or {}, timeline.end or {}
    title = f"call {timeline.sampling_id}"
    if start or end:
        strategy = start.get("strategy_name") or end.get("strategy_name") or "?"
        loop_budget = end.get("loop_budget", start.get("loop_budget", "?"))
        concurrency = end.get("concurrency_budget", start.get("concurrency_budget", "?"))
        title += f"  {strategy}  loop_budget={loop_budget} concurrency_budget={concurrency}"
    table = Table(title=escape(title), title_justify="left", box=box.SIMPLE_HEAD)
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
            escape(_note(row)),
        )
    console.print(table)
    if end:
        console.print(
            f"  stop_reason={end.get('stop_reason')} success={end.get('success')} "
            f"iterations_used={end.get('iterations_used')} cancelled={end.get('cancelled')} "
            f"elapsed={float(end.get('elapsed_s') or 0.0) * 1000:.1f} ms",
            highlight=False,
        )
    else:
        console.print("  (no sampling_loop_end recorded: the call did not finish)")


def _note(row: AttemptRow) -> str:
    notes = [] if row.outcome == "completed" else [row.outcome]
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
