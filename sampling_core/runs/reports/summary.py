"""The end-of-run summary, computed from a run directory's records (``samplehooks report``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sampling_core.runs.store.index import RunIndex, outcome

__all__ = ["RETRIED", "RunSummary", "summarize", "summary_of"]

RETRIED = (
    "SELECT latest.line FROM latest WHERE EXISTS (SELECT 1 FROM rec e "
    "WHERE e.key = latest.key AND e.own = 1 AND e.line < latest.line)"
)
"""The latest record of each prompt that has an earlier one (a prompt sampled again)."""


@dataclass(slots=True)
class RunSummary:
    """What a run achieved so far: counts, attempts, tokens, wall time.

    Counts use the latest record of each prompt (a retried prompt counts once).
    """

    run_dir: Path
    total: int
    ok: int = 0
    failed: int = 0
    error: int = 0
    not_known_prompts: int = 0
    """Prompts whose outcome a rescore could not decide (none passed, and an attempt not
    known might have): neither ok nor failed, left out of the success rate."""
    attempts_histogram: dict[int, int] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    usage_unknown: int = 0
    """Prompts whose backend did not report their tokens (left out of the token sums)."""
    not_started: int = 0
    """Subsamples that never started (the prompt was decided before their launch)."""
    stopped_early: int = 0
    """Attempts whose generation a prefix check stopped early."""
    wall_time_s: float = 0.0
    sessions: int = 0
    top_reasons: list[tuple[str, int]] = field(default_factory=list)
    """The requirements failed prompts missed most (and errors), with prompt counts."""
    foreign: int = 0
    """Records that are not of this run's prompts (left out of every count)."""
    cached_calls: int = 0
    """Backend calls the response cache answered (their tokens are not in the counts above)."""
    cached_tokens: int = 0
    """The tokens those calls took when they were generated (not spent again)."""
    rescored_from: str | None = None
    """The run this one rescored (``samplehooks rescore``), if it is a rescore."""
    not_run: tuple[int, int] = (0, 0)
    """A rescore's prompts, and attempts, that the new checks would have gone on to make but
    the source never ran (it had stopped them early): their outcome is over fewer attempts."""
    retried: int = 0
    """Prompts with more than one record (sampled again by ``--retry-failed``)."""
    not_known: int = 0
    """A rescore's attempts that it could not decide: their text was cut before its end
    (early stop) and the new checks would need the rest, or a check needs what the run did
    not keep (log-probabilities, a model's reply). Neither passed nor failed."""

    @property
    def done(self) -> int:
        """Prompts with a record."""
        return self.ok + self.failed + self.error + self.not_known_prompts

    @property
    def pending(self) -> int:
        """Prompts without a record yet."""
        return max(self.total - self.done, 0)

    @property
    def success_rate(self) -> float | None:
        """``ok`` over the prompts done whose outcome is known; ``None`` before any such
        prompt (no rate yet, not 0%)."""
        known = self.done - self.not_known_prompts
        return self.ok / known if known else None

    @property
    def complete(self) -> bool:
        """Every prompt has a record."""
        return self.pending == 0

    def render(self) -> str:
        """The summary as plain text, as ``samplehooks run`` and ``report`` print it."""
        state = "complete" if self.complete else f"{self.pending} pending; resume to finish"
        lines = [f"Run {self.run_dir}: {self.done} of {self.total} prompts done ({state})"]
        counts = [("ok", self.ok), ("failed", self.failed), ("error", self.error)]
        if self.not_known_prompts:
            counts.append(("not known", self.not_known_prompts))
        width = max(len(name) for name, _ in counts) + 2
        for name, count in counts:
            share = f"{100 * count / self.done:5.1f}%" if self.done else "    -"
            lines.append(f"  {name:<{width}}{count:>6}  {share}")
        rate, bounds = self.success_rate, ""
        if self.not_known_prompts:  # never bare: its bounds, every one failed or passed
            low, high = self.ok / self.done, (self.ok + self.not_known_prompts) / self.done
            bounds = f" ({self.not_known_prompts} not known: {100 * low:.1f}% to {100 * high:.1f}%)"
        if rate is not None:
            known = " whose outcome is known" if bounds else ""
            lines.append(f"  success rate: {100 * rate:.1f}% of finished prompts{known}{bounds}")
        elif bounds:  # prompts finished, but a rescore could decide none of them
            lines.append(f"  success rate: -, no finished prompt's outcome is known{bounds}")
        else:
            lines.append("  success rate: -, no prompt finished yet")
        if self.retried:
            lines.append(
                f"  retried {self.retried} prompts (--retry-failed): each prompt is counted "
                "at its latest record"
            )
        if self.attempts_histogram:
            lines.append("Attempts per prompt:")
            widest = max(self.attempts_histogram.values())
            for attempts in sorted(self.attempts_histogram):
                count = self.attempts_histogram[attempts]
                bar = "#" * max(1, round(30 * count / widest))
                lines.append(f"  {attempts:>3}  {bar} {count}")
        total = self.input_tokens + self.output_tokens
        unknown = (
            f"; unknown for {self.usage_unknown} prompt(s) whose backend did not report "
            "usage, or that cancelled an attempt before it reported any (not counted)"
            if self.usage_unknown
            else ""
        )
        at_least = "at least " if self.usage_unknown else ""
        lines.append(
            f"Tokens: {at_least}{self.input_tokens:,} in, {self.output_tokens:,} out "
            f"({total:,} total){unknown}"
        )
        if self.stopped_early or self.not_started:
            lines.append(
                f"Saved: {self.stopped_early} attempt(s) stopped early, "
                f"{self.not_started} subsample(s) never started"
            )
        if self.cached_calls:
            lines.append(
                f"Cached: {self.cached_calls:,} calls answered from the response cache "
                f"({self.cached_tokens:,} tokens not generated again)"
            )
        per = f", {self.wall_time_s / self.done:.2f} s per prompt" if self.done else ""
        sessions = f"{self.sessions} session{'s' if self.sessions != 1 else ''}"
        lines.append(f"Wall time: {self.wall_time_s:.1f} s over {sessions}{per}")
        if self.rescored_from is not None:
            lines.append(f"Rescored from {self.rescored_from} (no generation)")
            if self.not_known:
                lines.append(
                    f"  not known: {self.not_known:,} attempts the new checks cannot judge (cut "
                    "before their end by early stop, or a check needs what the run did not "
                    "keep); they are counted apart, never as passed"
                )
            if self.not_run[0]:
                lines.append(
                    f"  not known: {self.not_run[1]:,} attempts of {self.not_run[0]:,} prompts "
                    "never ran (the source stopped them early); the new checks would have "
                    "made them, so those prompts are judged on fewer attempts"
                )
        if self.foreign:
            lines.append(
                f"Left out: {self.foreign} record(s) in records.jsonl are not of this run's "
                "prompts (a key not in its dataset, or another content hash)"
            )
        if self.top_reasons:
            lines.append("Unmet requirements (prompts not ok):")
            lines += [f"  {count:>5}  {reason}" for reason, count in self.top_reasons]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        """The summary as JSON-ready data."""
        return {
            "total": self.total,
            "done": self.done,
            "ok": self.ok,
            "failed": self.failed,
            "error": self.error,
            "not_known_prompts": self.not_known_prompts,
            "pending": self.pending,
            "success_rate": self.success_rate,
            "attempts_histogram": {str(k): v for k, v in sorted(self.attempts_histogram.items())},
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "usage_unknown_prompts": self.usage_unknown,
            "stopped_early": self.stopped_early,
            "not_started": self.not_started,
            "wall_time_s": round(self.wall_time_s, 3),
            "sessions": self.sessions,
            "foreign_records": self.foreign,
            "cached_calls": self.cached_calls,
            "cached_tokens": self.cached_tokens,
            "rescored_from": self.rescored_from,
            "not_run": {"prompts": self.not_run[0], "attempts": self.not_run[1]},
            "retried_prompts": self.retried,
            "not_known": self.not_known,
        }


def summarize(path: str | Path) -> RunSummary:
    """The summary of the run in ``path`` (raises ``RunDirError`` if it is not a run).

    Reads the run through a :class:`~sampling_core.runs.store.index.RunIndex`: memory stays a
    few megabytes whatever the number of prompts.
    """
    with RunIndex.open(path) as index:
        return summary_of(index)


def summary_of(index: RunIndex) -> RunSummary:
    """The summary of an indexed run: its latest own record of each prompt counted, every
    other record (not one of this run's prompts as it was) counted in ``foreign_records``."""
    progress = index.run_dir.read_progress()
    total = int(index.meta.get("dataset", {}).get("count", 0))
    summary = RunSummary(index.run_dir.path, total=total)
    for status, count in index.query(
        f"SELECT {outcome()} AS o, COUNT(*) FROM latest JOIN rec USING (line) GROUP BY o"
    ):
        if status == "ok":
            summary.ok = count
        elif status == "failed":
            summary.failed = count
        elif status == "not_known":
            summary.not_known_prompts = count
        else:
            summary.error += count
    summary.attempts_histogram = dict(
        index.query("SELECT attempts, COUNT(*) FROM latest JOIN rec USING (line) GROUP BY attempts")
    )
    # what was spent: every own record's (a prompt sampled again by --retry-failed spent
    # on each of its records); what came out: each prompt's latest record
    tokens = index.query(
        "SELECT TOTAL(input_tokens), TOTAL(output_tokens), "
        "COUNT(DISTINCT key) FILTER (WHERE input_tokens IS NULL OR output_tokens IS NULL), "
        "TOTAL(cached_calls), TOTAL(cached_tokens) FROM rec WHERE own = 1"
    )
    tokens_in, tokens_out, unknown, cached_calls, cached_tokens = next(tokens)
    summary.input_tokens, summary.output_tokens = int(tokens_in), int(tokens_out)
    not_run_prompts, not_run, not_started, early, u = next(
        index.query(
            "SELECT COUNT(*) FILTER (WHERE not_run > 0), "
            "TOTAL(not_run), TOTAL(not_started), TOTAL(stopped_early), TOTAL(not_known) "
            "FROM latest JOIN rec USING (line)"
        )
    )
    summary.not_known = int(u)
    summary.not_started, summary.stopped_early = int(not_started), int(early)
    summary.usage_unknown = int(unknown)  # the backend did not say: not counted as 0
    summary.cached_calls, summary.cached_tokens = int(cached_calls), int(cached_tokens)
    summary.not_run = (int(not_run_prompts), int(not_run))
    source = index.meta.get("rescored_from")
    if isinstance(source, dict) and isinstance(source.get("run_dir"), str):
        summary.rescored_from = source["run_dir"]
    summary.top_reasons = list(
        index.query(
            "SELECT text, COUNT(*) AS n FROM latest JOIN reason USING (line) "
            "GROUP BY text ORDER BY n DESC, MIN(reason.rowid) LIMIT 5"
        )
    )
    summary.foreign = int(index.value("SELECT COUNT(*) FROM rec WHERE own != 1"))
    summary.retried = int(index.value(f"SELECT COUNT(*) FROM ({RETRIED})"))
    sessions = progress.get("sessions", [])
    summary.sessions = len(sessions)
    summary.wall_time_s = sum(float(s.get("elapsed_s", 0.0)) for s in sessions)
    return summary
