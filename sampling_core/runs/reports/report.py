"""A run's report: totals, one row per prompt, pass@k and pass^k, as text or JSON
(``samplehooks report``).

Read from the run directory only, so it works on a run still in progress (the prompts
without a record are counted as pending) and on run directories written by earlier
versions (fields a record lacks are shown as unknown). Read through the run's index
(:mod:`sampling_core.runs.store.index`): memory holds the totals and the rows shown, never the
run; ``report --json`` writes its rows as they are read (:func:`write_report_json`).

pass@k and pass^k count each prompt's first record that holds samples: a prompt that
``--retry-failed`` sampled again (because it failed) keeps its first samples there, and what
the retries made of those prompts is reported apart (:class:`Retries`), so retrying never
inflates either.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml

from sampling_core.redaction import printable
from sampling_core.runs.reports.summary import RETRIED, RunSummary, summary_of
from sampling_core.runs.stats.majk import Profile, maj_at_k_table, profile_of
from sampling_core.runs.stats.passk import PassAtK, pass_at_k_table, pass_hat_k_table
from sampling_core.runs.store.index import RunIndex, outcome
from sampling_core.runs.store.record import PromptRow
from sampling_core.runs.store.store import RunDirectory
from sampling_core.runs.store.votes import maj_caption, maj_entries, vote_weight_of

__all__ = [
    "Retries",
    "RunReport",
    "build_report",
    "first_votes",
    "iter_rows",
    "report_of",
    "report_rows",
    "row_columns",
    "row_from",
    "write_report",
    "write_report_json",
]


@dataclass(slots=True)
class Retries:
    """What ``--retry-failed`` added: the prompts sampled again, apart from pass@k."""

    prompts: int
    """Prompts with more than one record (sampled again after they failed or errored)."""
    records: int
    """Records beyond each prompt's first."""
    now_ok: int
    """Of those prompts, the ones whose latest record is ok."""
    pass_at_k: list[PassAtK] = field(default_factory=list)
    """pass@k of those prompts over their latest record's samples (when the run measures
    pass@k): how the retries did, on prompts chosen because they had failed."""

    def as_dict(self) -> dict[str, Any]:
        """As JSON-ready data."""
        return {
            "prompts": self.prompts,
            "records": self.records,
            "now_ok": self.now_ok,
            "pass_at_k": [p.as_dict() for p in self.pass_at_k] if self.pass_at_k else None,
        }


@dataclass(slots=True)
class RunReport:
    """The summary of a run, its cost, pass@k when the run measured it, what
    ``--retry-failed`` added, the first prompts not ok, and each prompt's row when asked
    for (``build_report(rows=True)``)."""

    summary: RunSummary
    rows: list[PromptRow]
    config: dict[str, Any] = field(default_factory=dict)
    pass_at_k: list[PassAtK] = field(default_factory=list)
    pass_hat_k: list[PassAtK] = field(default_factory=list)
    """pass^k: the chance that k samples all pass (as ``pass_at_k``, from the same samples)."""
    maj_at_k: list[PassAtK] = field(default_factory=list)
    """maj@k: the chance that the majority answer of k samples is right (runs whose samples'
    answers are known: a field check, or a majority strategy);
    :mod:`~sampling_core.runs.stats.majk`."""
    prompts: int = 0
    """Prompts with a record (each counted once, at its latest record)."""
    priced: int = 0
    """Prompts whose cost is known."""
    priced_cost: float = 0.0
    failed: list[PromptRow] = field(default_factory=list)
    """The first prompts not ok (errors first, then by key), as many as asked for."""
    failed_count: int = 0
    """Prompts not ok in all."""
    retries: Retries | None = None
    """What ``--retry-failed`` added (``None`` when no prompt was sampled twice)."""
    partial_samples: int = 0
    """Prompts whose pass@k samples were counted from a cut attempt list (records written
    before records kept their sample counts, with over 1,000 attempts): their ``n`` is low."""
    not_known: tuple[int, int] = (0, 0)
    """A rescore's samples it could not decide (their text was cut before the end), and
    the prompts they are of: left out of pass@k and pass^k (those prompts' ``n`` reduced)."""
    pass_at_k_if_failed: list[PassAtK] = field(default_factory=list)
    """pass@k with those samples counted as failed (the lowest it can be), beside the
    estimate over the samples that are known (only when some are not known)."""
    scores: tuple[int, float, float] | None = None
    """``(prompts, mean best, mean mean)``: the prompts whose attempts a scorer scored, the
    mean of each one's best score and of each one's mean score (``None`` when none was)."""

    @property
    def early_exit(self) -> bool:
        """Whether the run stopped each prompt at its first pass (the default)."""
        budgets = self.config.get("budgets") if isinstance(self.config.get("budgets"), dict) else {}
        return budgets.get("early_exit", True) is not False

    @property
    def vote_weight(self) -> str | None:
        """What the run's vote weighed answers by (maj@k is then labelled unweighted)."""
        return vote_weight_of(self.config)

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

    def as_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data: ``totals``, ``pass_at_k`` and ``pass_hat_k`` (or
        ``None``), ``retries`` (or ``None``), ``prompts`` (the rows the report was built with: none
        unless asked for)."""
        totals = self.summary.as_dict()
        totals["cost_usd"] = self.cost_usd
        totals["unpriced_prompts"] = self.unpriced
        totals["early_exit"] = self.early_exit
        return {
            "run_dir": str(self.summary.run_dir),
            "totals": totals,
            "pass_at_k": [p.as_dict() for p in self.pass_at_k] if self.pass_at_k else None,
            "pass_hat_k": [p.as_dict() for p in self.pass_hat_k] if self.pass_hat_k else None,
            "maj_at_k": maj_entries(self.maj_at_k, self.vote_weight) if self.maj_at_k else None,
            "pass_at_k_partial_prompts": self.partial_samples,
            "pass_at_k_not_known": {
                "samples": self.not_known[0],
                "prompts": self.not_known[1],
                "pass_at_k_if_failed": [p.as_dict() for p in self.pass_at_k_if_failed] or None,
            },
            "retries": self.retries.as_dict() if self.retries is not None else None,
            "scores": self._scores_dict(),
            "prompts": [r.as_dict() for r in self.rows],
        }

    def _scores_dict(self) -> dict[str, float | int] | None:
        if self.scores is None:
            return None
        prompts, best, mean = self.scores
        return {"prompts": prompts, "mean_best": best, "mean_mean": mean}

    def render(self, *, top: int = 10) -> str:
        """The summary, the cost, pass@k, the retries and the first ``top`` prompts not ok,
        as text (at most as many as :func:`build_report` kept)."""
        lines = [self.summary.render()]
        if self.cost_usd is not None:
            note = f" ({self.unpriced} prompts unpriced)" if self.unpriced else ""
            lines.append(f"Cost: ${self.cost_usd:.4f}{note}")
        elif self.prompts:
            lines.append("Cost: unknown (no price for this model; see docs/looking-at-runs.md)")
        if self.pass_at_k:
            first = "; each prompt's first samples" if self.retries is not None else ""
            lines.append(
                f"pass@k (unbiased estimator, 95% bootstrap interval over prompts{first}):"
            )
            lines += _passk_lines(self.pass_at_k)
            if self.pass_hat_k:
                lines.append(
                    "pass^k (every one of k samples passes; same estimator and intervals):"
                )
                lines += _passk_lines(self.pass_hat_k, "^")
            if self.maj_at_k:
                lines.append(maj_caption(self.vote_weight))
                lines += _passk_lines(self.maj_at_k, "maj")
            if self.not_known[0]:
                lines.append(
                    f"  not known: {self.not_known[0]} samples of {self.not_known[1]} prompts "
                    "cannot be judged by the new checks (cut before their end, stopped by the "
                    "run at a pass the new checks fail, or a check needs what the run did not "
                    "keep); they are left out (those prompts' n is "
                    "smaller), never counted as passed; counted as failed, pass@k would be:"
                )
                lines += ["  " + line for line in _passk_lines(self.pass_at_k_if_failed)]
            if self.partial_samples:
                lines.append(
                    f"  note: {self.partial_samples} prompts' samples were counted from the "
                    "first 1,000 attempts their record kept (written by an older version): "
                    "their n is too low"
                )
        if self.scores is not None:
            prompts, best, mean = self.scores
            lines.append(
                f"Scores (the strategy's scorer): {prompts} prompts scored; each one's best, "
                f"mean {best:.3f}; each one's mean, mean {mean:.3f}"
            )
        if self.retries is not None:
            r = self.retries
            lines.append(
                f"Retried (--retry-failed): {r.prompts} prompts sampled again ({r.records} more "
                f"records); {r.now_ok} of them are ok now (counted above; pass@k is not)"
            )
            if r.pass_at_k:
                lines.append("  pass@k of those prompts over their latest samples:")
                lines += ["  " + line for line in _passk_lines(r.pass_at_k)]
        shown = self.failed[:top]
        if self.failed_count:
            lines.append(f"Prompts not ok ({self.failed_count}; the first {len(shown)}):")
            for row in shown:
                failed = row.status in ("failed", "not_known")
                why = ", ".join(row.unmet) if failed and row.unmet else row.reason
                key, why = printable(str(row.key)), printable(str(why or ""))[:120]
                score = "" if row.score is None else _score_text(row.score)
                status = row.status.replace("_", " ")  # "not known" is wider than the rest
                lines.append(f"  {status:<6} {key}: {why}{score}")
        return "\n".join(lines)


def _score_text(score: tuple[float, float]) -> str:
    return f"  (score best {score[0]:.3f}, mean {score[1]:.3f})"


def _passk_lines(table: list[PassAtK], mark: str = "@") -> list[str]:
    name = "maj@" if mark == "maj" else f"pass{mark}"
    return [
        f"  {name}{p.k:<3} {100 * p.value:5.1f}%{p.note()}  "
        f"[{100 * p.low:5.1f}, {100 * p.high:5.1f}]  over {p.prompts} prompts"
        for p in table
    ]


def _read_config(run_dir: RunDirectory) -> dict[str, Any]:
    try:
        data = yaml.safe_load(run_dir.config_file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def build_report(path: str | Path, *, rows: bool = False, top: int = 10) -> RunReport:
    """The report of the run in ``path`` (raises ``RunDirError`` when it is not a run).

    Memory holds the totals, the first ``top`` prompts not ok and, only with ``rows``, each
    prompt's :class:`PromptRow` (``report --json`` writes those as it reads them instead:
    :func:`write_report_json`).
    """
    with RunIndex.open(path) as index:
        return report_of(index, rows=rows, top=top)


def write_report_json(path: str | Path, out: TextIO) -> RunReport:
    """``report --json``: the report of the run in ``path`` as JSON, its ``prompts`` written
    to ``out`` one at a time, in the order of the records (the same text as
    ``json.dumps(build_report(path, rows=True).as_dict(), indent=2)``); returns the report
    (without its rows)."""
    with RunIndex.open(path) as index:
        report = report_of(index, top=0)
        write_report(report.as_dict(), (row.as_dict() for row in iter_rows(index)), out)
    return report


def write_report(report: dict[str, Any], rows: Iterable[dict[str, Any]], out: TextIO) -> None:
    """``report`` (a :meth:`RunReport.as_dict`) as ``report --json`` writes it, its
    ``prompts`` being ``rows``, written to ``out`` one at a time as they come."""
    marker = "\u0000prompts\u0000"
    text = json.dumps({**report, "prompts": marker}, indent=2)
    head, tail = text.split(json.dumps(marker))
    out.write(head + "[")
    count = 0
    for count, row in enumerate(rows, start=1):
        out.write(f"{',' if count > 1 else ''}\n    {_row_json(row)}")
    out.write(("\n  ]" if count else "]") + tail + "\n")


def _row_json(item: dict[str, Any]) -> str:
    """``json.dumps(item, indent=2)`` indented for a member of ``prompts``, made with the
    C encoder (``indent`` alone would use the pure-Python one: ten times slower)."""
    fields = []
    for name, value in item.items():
        text = json.dumps(value)
        if isinstance(value, list) and value:
            text = "[\n        " + ",\n        ".join(map(json.dumps, value)) + "\n      ]"
        fields.append(f"      {json.dumps(name)}: {text}")
    return "{\n" + ",\n".join(fields) + "\n    }"


def report_of(index: RunIndex, *, rows: bool = False, top: int = 10) -> RunReport:
    """The report of an indexed run (see :func:`build_report`)."""
    report = RunReport(summary_of(index), [], _read_config(index.run_dir))
    latest = "FROM latest JOIN rec USING (line)"
    report.prompts, report.priced, report.failed_count = next(
        index.query(
            f"SELECT COUNT(*), COUNT(cost_usd), COUNT(*) FILTER (WHERE status != 'ok') {latest}"
        )
    )
    # what was spent: every own record's (a prompt sampled again spent on each record)
    report.priced_cost = float(index.value("SELECT TOTAL(cost_usd) FROM rec WHERE own = 1"))
    report.failed = [
        row_from(values)
        for values in index.query(
            f"SELECT {row_columns('rec')} {latest} WHERE status != 'ok' "
            "ORDER BY rec.status != 'error', rec.key LIMIT ?",
            (max(top, 0),),
        )
    ]
    scored, best, mean = next(
        index.query(f"SELECT COUNT(best_score), AVG(best_score), AVG(mean_score) {latest}")
    )
    report.scores = (int(scored), best, mean) if scored else None
    if rows:
        report.rows = list(iter_rows(index))
    if not report.early_exit:
        first = {(n, c): m for n, c, m in index.query(_FIRST_SAMPLES)}
        report.pass_at_k = pass_at_k_table(first)
        report.pass_hat_k = pass_hat_k_table(first)
        report.maj_at_k = maj_at_k_table(first_votes(index))
        report.partial_samples = int(
            index.value("SELECT COUNT(*) FROM first JOIN rec USING (line) WHERE partial = 1")
        )
        samples, prompts = next(index.query(_NOT_KNOWN))
        report.not_known = (int(samples), int(prompts))
        if samples:  # the same prompts, each with its samples not known: bounds beside each k
            known = {(n, c, u or 0): m for n, c, u, m in index.query(_WITH_NOT_KNOWN)}
            report.pass_at_k = pass_at_k_table(known)
            report.pass_hat_k = pass_hat_k_table(known)
            counted: dict[tuple[int, int], int] = {}
            for (n, c, u), m in known.items():
                counted[(n + u, c)] = counted.get((n + u, c), 0) + m
            report.pass_at_k_if_failed = pass_at_k_table(counted)
    report.retries = _retries(index, report.summary.retried, measure=not report.early_exit)
    return report


_NOT_KNOWN = (
    "SELECT TOTAL(u), COUNT(*) FILTER (WHERE u > 0) FROM rec WHERE line IN (SELECT line FROM "
    "first) OR line IN (SELECT MIN(line) FROM rec WHERE own = 1 AND u > 0 AND key NOT IN "
    "(SELECT key FROM first) GROUP BY key)"
)
"""A rescore's undecided samples and their prompts: in each prompt's first record with
samples (or, for a prompt none of whose samples could be decided, its first record)."""
_WITH_NOT_KNOWN = (
    "SELECT n, c, u, COUNT(*) FROM rec WHERE n + IFNULL(u, 0) > 0 AND (line IN "
    "(SELECT line FROM first) OR line IN (SELECT MIN(line) FROM rec WHERE own = 1 AND u > 0 "
    "AND key NOT IN (SELECT key FROM first) GROUP BY key)) GROUP BY n, c, u"
)
"""Each prompt's ``(n, c, u)``: its known samples, those passed, and those not known."""
_FIRST_SAMPLES = "SELECT n, c, COUNT(*) FROM first JOIN rec USING (line) GROUP BY n, c"


def first_votes(index: RunIndex) -> dict[Profile, int]:
    """The vote profiles of each prompt's first samples (those pass@k counts), with the
    number of prompts that have each; empty when no sample's answer is known."""
    found: dict[Profile, int] = {}
    for votes, prompts in index.query(
        "SELECT votes, COUNT(*) FROM first JOIN rec USING (line) "
        "WHERE votes IS NOT NULL GROUP BY votes"
    ):
        profile = profile_of(json.loads(votes))
        if profile is not None:
            found[profile] = found.get(profile, 0) + prompts
    return found


def _retries(index: RunIndex, prompts: int, *, measure: bool) -> Retries | None:
    if not prompts:
        return None
    records = int(index.value("SELECT COUNT(*) FROM rec WHERE own = 1")) - int(
        index.value("SELECT COUNT(*) FROM latest")
    )
    now_ok = int(
        index.value(f"SELECT COUNT(*) FROM rec WHERE line IN ({RETRIED}) AND status = 'ok'")
    )
    retries = Retries(prompts, records, now_ok)
    if measure:
        counts = index.query(
            f"SELECT n, c, COUNT(*) FROM rec WHERE line IN ({RETRIED}) AND n > 0 GROUP BY n, c"
        )
        retries.pass_at_k = pass_at_k_table({(n, c): m for n, c, m in counts})
    return retries


_ROW_FIELDS = (
    "key, sampling_id, status, attempts, passes, cancelled, unmet, reason, input_tokens, "
    "output_tokens, cost_usd, latency_s, elapsed_s, not_started, stopped_early, not_known, "
    "best_score, mean_score"
)


def row_columns(table: str) -> str:
    """The columns of ``table`` (``rec`` or an alias of it) that :func:`row_from` reads
    (its status is the prompt's outcome: ``not_known`` when a rescore could not decide it)."""
    names = (name.strip() for name in _ROW_FIELDS.split(","))
    return ", ".join(outcome(table) if n == "status" else f"{table}.{n}" for n in names)


def row_from(values: Iterable[Any]) -> PromptRow:
    """A :class:`PromptRow` from the columns :func:`row_columns` names, in that order."""
    (key, sampling_id, status, attempts, passes, cancelled, unmet, reason, *rest) = values
    *numbers, not_started, stopped_early, not_known, best, mean = rest
    return PromptRow(
        key,
        sampling_id,
        status,
        attempts,
        passes,
        cancelled,
        json.loads(unmet),
        reason,
        *numbers,
        not_started=not_started or 0,
        stopped_early=stopped_early or 0,
        not_known=not_known or 0,
        score=None if best is None else (best, mean),
    )


def report_rows(path: str | Path) -> Iterator[PromptRow]:
    """Each prompt's row of the run in ``path`` (its latest record), in the order of the
    records, read as they are needed (raises ``RunDirError`` when it is not a run)."""
    with RunIndex.open(path) as index:
        yield from iter_rows(index)


def iter_rows(index: RunIndex) -> Iterator[PromptRow]:
    """Each prompt's row (its latest record), in the order of the records file."""
    for values in index.query(
        f"SELECT {row_columns('rec')} FROM latest JOIN rec USING (line) ORDER BY line"
    ):
        yield row_from(values)
