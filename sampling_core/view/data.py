"""The data a view page embeds: one run's totals, pass@k, charts, prompts and their timelines.

Bounded whatever the size of the run: the charts are drawn from counts the run's index
computes (histograms, quantiles, successes by attempts used), and the page lists at most
:data:`MAX_ROWS` prompts (those not ok first, then by key), the first
:data:`MAX_TIMELINES` of them with their attempt timelines; a note says what was left out
(``samplehooks report DIR --json`` lists every prompt).
"""

from __future__ import annotations

from math import ceil, floor, sqrt
from pathlib import Path
from typing import Any

from sampling_core.runs.reports.report import RunReport, report_of, row_columns, row_from
from sampling_core.runs.store.index import RunIndex
from sampling_core.runs.store.kept_texts import texts_of_calls
from sampling_core.runs.store.votes import maj_entries
from sampling_core.view.timeline import (
    TEXT_SHOWN,
    add_record_details,
    add_whole_texts,
    lanes_from_call,
    lanes_from_record,
    read_events_by_call,
)

__all__ = ["MAX_ROWS", "MAX_TIMELINES", "charts", "indexed_run_data", "run_data"]

MAX_ROWS = 10_000
"""Prompts the page's table lists (those not ok first, then by key)."""

MAX_TIMELINES = 2_000
"""Prompts whose attempt timeline is embedded (the first of the table's): keeps a page of a
big run small enough for a laptop's browser."""

LATEST = "FROM latest JOIN rec USING (line)"

_VALUES = {
    "elapsed_s": "rec.elapsed_s",
    "tokens": "rec.input_tokens + rec.output_tokens",
    "cost_usd": "rec.cost_usd",
}
"""The per-prompt numbers the page draws as histograms, as SQL over ``rec``."""


def _budgets(report: RunReport) -> dict[str, Any]:
    budgets = report.config.get("budgets")
    budgets = budgets if isinstance(budgets, dict) else {}
    return {
        "loop_budget": budgets.get("loop_budget", 1),
        "concurrency_budget": budgets.get("concurrency_budget", 1),
        "early_exit": report.early_exit,
    }


def run_data(path: str | Path, *, whole_texts: bool = False) -> dict[str, Any]:
    """Everything the page shows of the run in ``path`` but the histograms (raises
    ``RunDirError`` when it is not a run)."""
    with RunIndex.open(path) as index:
        return indexed_run_data(index, whole_texts=whole_texts)


def indexed_run_data(index: RunIndex, *, whole_texts: bool = False) -> dict[str, Any]:
    """Everything the page shows of one indexed run but the histograms (:func:`charts`).

    Each attempt's text is its first 400 characters, or with ``whole_texts`` its whole text
    (from ``texts.jsonl``) for every prompt whose timeline is embedded.
    """
    report = report_of(index, top=0)
    run_dir = index.run_dir
    notes: list[str] = []
    summary = report.summary
    if not summary.complete:
        notes.append(
            f"{summary.pending} of {summary.total} prompts have no record yet "
            "(a run in progress, or one that was stopped: resume it to finish)"
        )
    if summary.rescored_from is not None:
        unknown = (
            f"; {summary.not_run[0]} prompts are judged on fewer attempts than the new checks "
            f"would have made ({summary.not_run[1]} never ran: the source stopped them early)"
            if summary.not_run[0]
            else ""
        )
        notes.append(f"rescored from {summary.rescored_from}, with no generation{unknown}")
    done = report.prompts
    listed = [
        (line, row_from(values))
        for line, *values in index.query(
            f"SELECT line, {row_columns('rec')} {LATEST} "
            "ORDER BY rec.status = 'ok', rec.key LIMIT ?",
            (MAX_ROWS,),
        )
    ]
    if done > len(listed):
        notes.append(
            f"the table lists {len(listed):,} of {done:,} prompts (those not ok first, then by "
            "key); the charts and totals count them all. `samplehooks report DIR --json` "
            "lists every prompt"
        )
    if len(listed) > MAX_TIMELINES:
        notes.append(
            f"timelines are embedded for the first {MAX_TIMELINES:,} prompts of the table "
            "(those not ok first)"
        )
    if report.retries is not None:
        notes.append(
            f"{report.retries.prompts} prompts were sampled again by --retry-failed: the "
            "table and the outcomes show their latest record; pass@k counts each prompt's "
            "first samples (the retries' own pass@k is under the pass@k chart)"
        )
    records = {line: index.read_record(line) for line, _ in listed[:MAX_TIMELINES]}
    wanted = {r.sampling_id for r in records.values() if r.sampling_id}
    events = read_events_by_call(run_dir.events_file, wanted)
    if not events.present:
        notes.append(
            "no events.jsonl (the recorder plugin was off): timelines come from the records, "
            "which keep each attempt's outcome but not when cancelled attempts ran"
        )
    if events.bad_lines:
        notes.append(f"events.jsonl: {events.bad_lines} lines skipped (not hook events)")
    kept = texts_of_calls(run_dir.texts_file, wanted) if whole_texts else {}
    shown = None if whole_texts else TEXT_SHOWN
    prompts = []
    for line, row in listed:
        item = row.as_dict()
        record = records.get(line)
        if record is not None:
            text = record.text
            item["text"] = text[:shown] if text is not None else None
            call = events.by_call.get(str(row.sampling_id))
            if call is not None:
                item["lanes"], item["timeline_source"] = lanes_from_call(call), "events"
                add_record_details(item["lanes"], record)
            else:
                item["lanes"], item["timeline_source"] = lanes_from_record(record), "records"
            if whole_texts:
                add_whole_texts(item["lanes"], kept.get(str(row.sampling_id), {}))
        prompts.append(item)
    return {
        "name": run_dir.path.name or str(run_dir.path),
        "dir": str(run_dir.path),
        "complete": summary.complete,
        "totals": report.as_dict()["totals"],
        "budgets": _budgets(report),
        "model": _model(report.config),
        # each with the note the report writes beside it (samples not known, the bounds)
        "pass_at_k": [{**p.as_dict(), "note": p.note()} for p in report.pass_at_k],
        "pass_hat_k": [{**p.as_dict(), "note": p.note()} for p in report.pass_hat_k],
        "maj_at_k": maj_entries(report.maj_at_k, report.vote_weight),
        "retries": report.retries.as_dict() if report.retries is not None else None,
        "mean_attempts": index.value(f"SELECT AVG(attempts) {LATEST}"),
        "ok_by_attempts": [
            list(pair)
            for pair in index.query(
                f"SELECT attempts, COUNT(*) {LATEST} WHERE status = 'ok' "
                "GROUP BY attempts ORDER BY attempts"
            )
        ],
        "max_attempts": index.value(f"SELECT MAX(attempts) {LATEST}") or 0,
        "stats": {name: _stats(index, sql) for name, sql in _VALUES.items()},
        "notes": notes,
        "prompts": prompts,
    }


def _stats(index: RunIndex, value: str) -> dict[str, Any]:
    """How many prompts have the number, and its median, 90th percentile and largest."""
    count = int(index.value(f"SELECT COUNT({value}) {LATEST}"))

    def at(q: float) -> Any:
        return index.value(
            f"SELECT {value} AS v {LATEST} WHERE v IS NOT NULL ORDER BY v LIMIT 1 OFFSET ?",
            (floor(q * (count - 1) + 0.5),),
        )

    if not count:
        return {"count": 0, "median": None, "p90": None, "max": None, "positive": 0}
    return {
        "count": count,
        "median": at(0.5),
        "p90": at(0.9),
        "max": at(1.0),
        "positive": int(index.value(f"SELECT COUNT(*) {LATEST} WHERE {value} > 0")),
    }


def charts(indexes: list[RunIndex]) -> dict[str, Any]:
    """The histograms of each number of :data:`_VALUES`, with the same bins for every run
    (up to 12, between the smallest and the largest value of all the runs)."""
    out: dict[str, Any] = {}
    for name, value in _VALUES.items():
        found = [
            next(index.query(f"SELECT COUNT({value}), MIN({value}), MAX({value}) {LATEST}"))
            for index in indexes
        ]
        count = sum(c for c, _, _ in found)
        if not count:
            out[name] = {"edges": [], "counts": [[] for _ in indexes]}
            continue
        low = min(lo for c, lo, _ in found if c)
        high = max(hi for c, _, hi in found if c)
        bins = min(12, max(1, ceil(sqrt(count))))
        width = (high - low) / bins or 1.0
        counts = []
        for index in indexes:
            per_bin = [0] * bins
            for slot, number in index.query(
                f"SELECT MIN(CAST(({value} - ?) / ? AS INTEGER), ?) AS slot, COUNT(*) {LATEST} "
                f"WHERE {value} IS NOT NULL GROUP BY slot",
                (low, width, bins - 1),
            ):
                per_bin[max(0, int(slot))] += number
            counts.append(per_bin)
        out[name] = {"edges": [low + i * width for i in range(bins)], "counts": counts}
    return out


def _model(config: dict[str, Any]) -> str:
    backend = config.get("backend")
    if not isinstance(backend, dict):
        return "unknown"
    kind = str(backend.get("kind", "?"))
    name = backend.get("model") or backend.get("model_path")
    return f"{kind}: {name}" if name else kind
