"""The data a view page embeds: one run's totals, pass@k, prompts and their timelines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sampling_core.runs.kept_texts import texts_of_calls
from sampling_core.runs.report import RunReport, build_report
from sampling_core.runs.store import RunDirectory
from sampling_core.view.timeline import (
    TEXT_SHOWN,
    add_record_details,
    add_whole_texts,
    lanes_from_call,
    lanes_from_record,
    read_events_by_call,
)

__all__ = ["MAX_TIMELINES", "run_data"]

MAX_TIMELINES = 2000
"""Prompts whose attempt timeline is embedded (those not ok first): keeps a page of a big
run small enough for a laptop's browser; the table lists every prompt."""


def _budgets(report: RunReport) -> dict[str, Any]:
    budgets = report.config.get("budgets")
    budgets = budgets if isinstance(budgets, dict) else {}
    return {
        "loop_budget": budgets.get("loop_budget", 1),
        "concurrency_budget": budgets.get("concurrency_budget", 1),
        "early_exit": report.early_exit,
    }


def run_data(path: str | Path, *, whole_texts: bool = False) -> dict[str, Any]:
    """Everything the page shows of the run in ``path`` (raises ``RunDirError`` if not a run).

    Each attempt's text is its first 400 characters, or with ``whole_texts`` its whole text
    (from ``texts.jsonl``) for every prompt whose timeline is embedded.
    """
    latest: dict[str, dict[str, Any]] = {}  # the records the report counts, by key
    report = build_report(
        path, rows=True, visit=lambda record: latest.update({record["key"]: record})
    )
    run_dir = RunDirectory(Path(path))
    notes: list[str] = []
    if not report.summary.complete:
        notes.append(
            f"{report.summary.pending} of {report.summary.total} prompts have no record yet "
            "(a run in progress, or one that was stopped: resume it to finish)"
        )
    summary = report.summary
    if summary.rescored_from is not None:
        unknown = (
            f"; {summary.not_run[0]} prompts are judged on fewer attempts than the new checks "
            f"would have made ({summary.not_run[1]} never ran: the source stopped them early)"
            if summary.not_run[0]
            else ""
        )
        notes.append(f"rescored from {summary.rescored_from}, with no generation{unknown}")
    order = sorted(latest, key=lambda key: (latest[key].get("status") == "ok", key))
    with_timeline = set(order[:MAX_TIMELINES])
    if len(order) > MAX_TIMELINES:
        notes.append(
            f"timelines are embedded for {MAX_TIMELINES} of {len(order)} prompts "
            "(those not ok first)"
        )
    wanted = {str(latest[k]["sampling_id"]) for k in with_timeline if latest[k].get("sampling_id")}
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
    for row in report.rows:
        record = latest[row.key]
        item = row.as_dict()
        text = record.get("text")
        item["text"] = text[:shown] if isinstance(text, str) else None
        if row.key in with_timeline:
            call = events.by_call.get(str(row.sampling_id))
            if call is not None:
                item["lanes"], item["timeline_source"] = lanes_from_call(call), "events"
                add_record_details(item["lanes"], record)
            else:
                item["lanes"], item["timeline_source"] = lanes_from_record(record), "records"
            if whole_texts:
                add_whole_texts(item["lanes"], kept.get(str(row.sampling_id), {}))
        prompts.append(item)
    totals = report.as_dict()["totals"]
    return {
        "name": run_dir.path.name or str(run_dir.path),
        "dir": str(run_dir.path),
        "complete": report.summary.complete,
        "totals": totals,
        "budgets": _budgets(report),
        "model": _model(report.config),
        "pass_at_k": [p.as_dict() for p in report.pass_at_k],
        "pass_hat_k": [p.as_dict() for p in report.pass_hat_k],
        "notes": notes,
        "prompts": prompts,
    }


def _model(config: dict[str, Any]) -> str:
    backend = config.get("backend")
    if not isinstance(backend, dict):
        return "unknown"
    kind = str(backend.get("kind", "?"))
    name = backend.get("model") or backend.get("model_path")
    return f"{kind}: {name}" if name else kind
