"""A run's report: totals, one row per prompt, pass@k and pass^k, as text or JSON
(``samplehooks report``).

Read from the run directory only, so it works on a run still in progress (the prompts
without a record are counted as pending) and on run directories written by earlier
versions (fields a record lacks are shown as unknown).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from math import isfinite
from pathlib import Path
from typing import Any

import yaml

from sampling_core.runs.passk import PassAtK, pass_at_k_table, pass_hat_k_table
from sampling_core.runs.store import RunDirectory
from sampling_core.runs.summary import RunSummary, summarize

__all__ = ["PromptRow", "RunReport", "build_report", "prompt_row", "sample_counts"]


@dataclass(slots=True)
class PromptRow:
    """One prompt's outcome: what ``report --json`` lists under ``prompts``."""

    key: str
    sampling_id: str | None
    status: str
    attempts: int
    passes: int
    cancelled: int
    unmet: list[str]
    reason: str | None
    input_tokens: int | None
    output_tokens: int | None
    """``None``: the backend did not report them (unknown, never 0)."""
    cost_usd: float | None
    latency_s: float | None
    elapsed_s: float | None
    samples: tuple[int, int] | None = None
    """``(n, c)``: subsamples that ran to their end, and those of them that passed."""

    def as_dict(self) -> dict[str, Any]:
        """As JSON-ready data."""
        return {
            "key": self.key,
            "sampling_id": self.sampling_id,
            "status": self.status,
            "attempts": self.attempts,
            "passes": self.passes,
            "cancelled": self.cancelled,
            "unmet_requirements": self.unmet,
            "reason": self.reason,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "latency_s": self.latency_s,
            "elapsed_s": self.elapsed_s,
        }


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and isfinite(value):
        return float(value)
    return None


def sample_counts(record: dict[str, Any]) -> tuple[int, int]:
    """``(n, c)`` for pass@k: subsamples that ended by passing or by spending their budget
    (not by a backend error), and how many of them passed."""
    attempts = record.get("attempts") if isinstance(record.get("attempts"), dict) else {}
    each = [e for e in attempts.get("each") or [] if isinstance(e, dict)]
    passed: set[int] = set()
    errored: set[int] = set()
    seen: set[int] = set()
    for entry in each:
        index = entry.get("subsample")
        if not isinstance(index, int):
            continue
        seen.add(index)
        if entry.get("error"):
            errored.add(index)
        elif entry.get("passed"):
            passed.add(index)
    ran = seen - (errored - passed)
    return len(ran), len(passed & ran)


def prompt_row(record: dict[str, Any]) -> PromptRow:
    """The row of one record (old records lack some fields: they come out as ``None``)."""
    attempts = record.get("attempts") if isinstance(record.get("attempts"), dict) else {}
    usage = record.get("usage") if isinstance(record.get("usage"), dict) else {}
    timings = record.get("timings") if isinstance(record.get("timings"), dict) else {}
    each = [e for e in attempts.get("each") or [] if isinstance(e, dict)]
    unmet = list(record.get("failed_requirements") or [])
    if record.get("status") == "error" and not unmet:
        unmet = ["(error)"]
    passes = attempts.get("passing")
    return PromptRow(
        key=str(record.get("key")),
        sampling_id=record.get("sampling_id"),
        status=str(record.get("status")),
        attempts=int(attempts.get("used") or 0),
        passes=int(passes) if isinstance(passes, int) else sum(bool(e.get("passed")) for e in each),
        cancelled=int(attempts.get("cancelled") or 0),
        unmet=unmet,
        reason=record.get("reason"),
        input_tokens=_tokens(usage, "input_tokens"),
        output_tokens=_tokens(usage, "output_tokens"),
        cost_usd=_number(usage.get("cost_usd")),
        latency_s=_number(usage.get("latency_s"))
        if "latency_s" in usage
        else (sum(_number(e.get("latency_s")) or 0.0 for e in each) if each else None),
        elapsed_s=_number(timings.get("elapsed_s")),
        samples=sample_counts(record),
    )


@dataclass(slots=True)
class RunReport:
    """The summary of a run, its cost, pass@k and pass^k when the run measured them, the
    first prompts not ok, and each prompt's row when asked for (``build_report(rows=True)``)."""

    summary: RunSummary
    rows: list[PromptRow]
    config: dict[str, Any] = field(default_factory=dict)
    pass_at_k: list[PassAtK] = field(default_factory=list)
    pass_hat_k: list[PassAtK] = field(default_factory=list)
    """pass^k: the chance that k samples all pass (as ``pass_at_k``, from the same samples)."""
    prompts: int = 0
    """Prompts with a record (each counted once, at its latest record)."""
    priced: int = 0
    """Prompts whose cost is known."""
    priced_cost: float = 0.0
    failed: list[PromptRow] = field(default_factory=list)
    """The first prompts not ok (errors first, then by key), as many as asked for."""
    failed_count: int = 0
    """Prompts not ok in all."""

    @property
    def early_exit(self) -> bool:
        """Whether the run stopped each prompt at its first pass (the default)."""
        budgets = self.config.get("budgets") if isinstance(self.config.get("budgets"), dict) else {}
        return budgets.get("early_exit", True) is not False

    @property
    def cost_usd(self) -> float | None:
        """The priced prompts' total cost (``None`` when no prompt was priced)."""
        return self.priced_cost if self.priced else None

    @property
    def unpriced(self) -> int:
        """Prompts whose cost is unknown (model without a known price, or an old record)."""
        return self.prompts - self.priced

    def failed_rows(self) -> list[PromptRow]:
        """The first prompts not ok that the report kept, errors first, then by key."""
        return list(self.failed)

    def add(self, row: PromptRow, *, keep_row: bool, top: int) -> None:
        """Count one prompt's row (what :func:`build_report` does for each latest record)."""
        self.prompts += 1
        if row.cost_usd is not None:
            self.priced += 1
            self.priced_cost += row.cost_usd
        if row.status != "ok":
            self.failed_count += 1
            if top > 0:
                self.failed.append(row)
                if len(self.failed) >= 2 * top:  # bounded: keep the first `top` only
                    self._trim(top)
        if keep_row:
            self.rows.append(row)

    def _trim(self, top: int) -> None:
        self.failed.sort(key=lambda r: (r.status != "error", r.key))
        del self.failed[top:]

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data: ``totals``, ``pass_at_k`` and ``pass_hat_k`` (or
        ``None``), ``prompts`` (the rows the report was built with: none unless asked for)."""
        totals = self.summary.as_dict()
        totals["cost_usd"] = self.cost_usd
        totals["unpriced_prompts"] = self.unpriced
        totals["early_exit"] = self.early_exit
        return {
            "run_dir": str(self.summary.run_dir),
            "totals": totals,
            "pass_at_k": [p.as_dict() for p in self.pass_at_k] if self.pass_at_k else None,
            "pass_hat_k": [p.as_dict() for p in self.pass_hat_k] if self.pass_hat_k else None,
            "prompts": [r.as_dict() for r in self.rows],
        }

    def render(self, *, top: int = 10) -> str:
        """The summary, the cost, pass@k, pass^k and the first ``top`` prompts not ok, as text
        (at most as many as :func:`build_report` kept)."""
        lines = [self.summary.render()]
        if self.cost_usd is not None:
            note = f" ({self.unpriced} prompts unpriced)" if self.unpriced else ""
            lines.append(f"Cost: ${self.cost_usd:.4f}{note}")
        elif self.prompts:
            lines.append("Cost: unknown (no price for this model; see docs/looking-at-runs.md)")
        if self.pass_at_k:
            lines.append("pass@k (unbiased estimator, 95% bootstrap interval over prompts):")
            lines += [
                f"  pass@{p.k:<3} {100 * p.value:5.1f}%  [{100 * p.low:5.1f}, {100 * p.high:5.1f}]"
                f"  over {p.prompts} prompts"
                for p in self.pass_at_k
            ]
        if self.pass_hat_k:
            lines.append("pass^k (every one of k samples passes; same estimator and intervals):")
            lines += [
                f"  pass^{p.k:<3} {100 * p.value:5.1f}%  [{100 * p.low:5.1f}, {100 * p.high:5.1f}]"
                f"  over {p.prompts} prompts"
                for p in self.pass_hat_k
            ]
        shown = self.failed[:top]
        if self.failed_count:
            lines.append(f"Prompts not ok ({self.failed_count}; the first {len(shown)}):")
            for row in shown:
                why = ", ".join(row.unmet) if row.status == "failed" and row.unmet else row.reason
                lines.append(f"  {row.status:<7}{row.key}: {str(why or '')[:120]}")
        return "\n".join(lines)


def _read_config(run_dir: RunDirectory) -> dict[str, Any]:
    try:
        data = yaml.safe_load(run_dir.config_file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def build_report(
    path: str | Path,
    *,
    rows: bool = False,
    top: int = 10,
    visit: Callable[[dict[str, Any]], None] | None = None,
) -> RunReport:
    """The report of the run in ``path`` (raises ``RunDirError`` when it is not a run).

    One streaming pass over the records (with the summary's): memory holds the totals, the
    first ``top`` prompts not ok and, for a run that measured pass@k, two small numbers a
    prompt; each prompt's :class:`PromptRow` only with ``rows`` (``report --json``, the view).
    ``visit`` is also called with each record the report counts (the latest of each of the
    run's prompts), in the same pass.
    """
    run_dir = RunDirectory(Path(path))
    report = RunReport(RunSummary(run_dir.path, total=0), [], _read_config(run_dir))
    counts: list[tuple[int, int]] = []
    shared: dict[tuple[int, int], tuple[int, int]] = {}  # one tuple per distinct (n, c)
    measure = not report.early_exit

    def count(record: dict[str, Any]) -> None:
        row = prompt_row(record)
        report.add(row, keep_row=rows, top=top)
        if measure and row.samples is not None:
            counts.append(shared.setdefault(row.samples, row.samples))
        if visit is not None:
            visit(record)

    report.summary = summarize(path, count)
    report._trim(top)
    if measure:
        report.pass_at_k = pass_at_k_table(counts)
        report.pass_hat_k = pass_hat_k_table(counts)
    return report


def _tokens(usage: dict[str, Any], name: str) -> int | None:
    """A record's token count; ``None`` when it says unknown (a record without the field,
    written before counts could be unknown, counts 0)."""
    value = usage.get(name, 0)
    return None if value is None else int(value)
