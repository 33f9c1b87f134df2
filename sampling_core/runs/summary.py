"""The end-of-run summary, computed from a run directory's records (``samplehooks report``)."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sampling_core.runs.integrity import foreign_records
from sampling_core.runs.meta_hashes import read_run_meta
from sampling_core.runs.store import RunDirectory

__all__ = ["RunSummary", "summarize"]


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
    attempts_histogram: dict[int, int] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    usage_unknown: int = 0
    """Prompts whose backend did not report their tokens (left out of the token sums)."""
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

    @property
    def done(self) -> int:
        """Prompts with a record."""
        return self.ok + self.failed + self.error

    @property
    def pending(self) -> int:
        """Prompts without a record yet."""
        return max(self.total - self.done, 0)

    @property
    def success_rate(self) -> float | None:
        """``ok / done``; ``None`` before any prompt finished (no rate yet, not 0%)."""
        return self.ok / self.done if self.done else None

    @property
    def complete(self) -> bool:
        """Every prompt has a record."""
        return self.pending == 0

    def render(self) -> str:
        """The summary as plain text, as ``samplehooks run`` and ``report`` print it."""
        state = "complete" if self.complete else f"{self.pending} pending; resume to finish"
        lines = [f"Run {self.run_dir}: {self.done} of {self.total} prompts done ({state})"]
        for name, count in (("ok", self.ok), ("failed", self.failed), ("error", self.error)):
            share = f"{100 * count / self.done:5.1f}%" if self.done else "    -"
            lines.append(f"  {name:<7}{count:>6}  {share}")
        rate = self.success_rate
        lines.append(
            "  success rate: -, no prompt finished yet"
            if rate is None
            else f"  success rate: {100 * rate:.1f}% of finished prompts"
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
            "usage (not counted)"
            if self.usage_unknown
            else ""
        )
        lines.append(
            f"Tokens: {self.input_tokens:,} in, {self.output_tokens:,} out ({total:,} total)"
            f"{unknown}"
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
            "pending": self.pending,
            "success_rate": self.success_rate,
            "attempts_histogram": {str(k): v for k, v in sorted(self.attempts_histogram.items())},
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "usage_unknown_prompts": self.usage_unknown,
            "wall_time_s": round(self.wall_time_s, 3),
            "sessions": self.sessions,
            "foreign_records": self.foreign,
            "cached_calls": self.cached_calls,
            "cached_tokens": self.cached_tokens,
            "rescored_from": self.rescored_from,
            "not_run": {"prompts": self.not_run[0], "attempts": self.not_run[1]},
        }


def latest_records(run_dir: RunDirectory) -> Iterator[dict[str, Any]]:
    """The last record of each key, reading the records file a line at a time.

    A key has several records only when its prompt ran again. The first pass marks each
    key's 64-bit digest in a bitmap (16 bits a record): keys that land on a marked bit
    may repeat. The second pass notes the highest ``seq`` of each of those few keys; the
    third yields every other record, and theirs only at that ``seq``. Memory stays a few
    bytes a record, never the records.
    """
    size = max(1 << 20, 16 * (run_dir.records_file.stat().st_size // 64 + 1))
    bitmap = bytearray(size // 8 + 1)
    maybe: set[int] = set()
    for record in run_dir.iter_records():
        digest = _digest(record["key"])
        index = digest % size
        if bitmap[index >> 3] & (1 << (index & 7)):
            maybe.add(digest)
        bitmap[index >> 3] |= 1 << (index & 7)
    del bitmap
    last: dict[tuple[int, str], int] = {}
    if maybe:
        for record in run_dir.iter_records():
            digest = _digest(record["key"])
            if digest in maybe:
                last[digest, record["key"]] = int(record.get("seq", 0))
    for record in run_dir.iter_records():
        if maybe:
            digest = _digest(record["key"])
            if digest in maybe and last[digest, record["key"]] != int(record.get("seq", 0)):
                continue  # an earlier record of a prompt that ran again
        yield record


def _count(value: Any) -> int:
    """A count read back from a record (anything else counts 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _digest(key: str) -> int:
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest())


def summarize(
    path: str | Path, visit: Callable[[dict[str, Any]], None] | None = None
) -> RunSummary:
    """The summary of the run in ``path`` (raises ``RunDirError`` if it is not a run).

    One streaming pass over the records: memory stays a few bytes a prompt. ``visit`` is
    called with the latest record of each of the run's prompts as it goes by (a record of
    another prompt, or of this prompt as it was before a change, is left out and counted
    in ``foreign_records``).
    """
    run_dir = RunDirectory(Path(path))
    run_dir.check_is_run(resuming=False)
    meta, hashes = read_run_meta(run_dir)  # a record of another prompt is left out
    progress = run_dir.read_progress()
    summary = RunSummary(run_dir.path, total=int(meta.get("dataset", {}).get("count", 0)))
    source = meta.get("rescored_from")
    if isinstance(source, dict) and isinstance(source.get("run_dir"), str):
        summary.rescored_from = source["run_dir"]
    histogram: Counter[int] = Counter()
    reasons: Counter[str] = Counter()
    for record in latest_records(run_dir):
        if not hashes.matches(record["key"], record.get("content_hash")):
            continue  # not one of this run's prompts as it was (counted below)
        if visit is not None:
            visit(record)
        status = record.get("status")
        if status == "ok":
            summary.ok += 1
        elif status == "failed":
            summary.failed += 1
        else:
            summary.error += 1
        if status == "failed":
            for requirement in record.get("failed_requirements") or ["(no requirement named)"]:
                reasons[requirement] += 1
        elif status == "error":
            reasons[f"error: {str(record.get('reason'))[:100]}"] += 1
        histogram[int(record.get("attempts", {}).get("used", 0))] += 1
        usage = record.get("usage", {})
        inputs, outputs = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
        if inputs is None or outputs is None:  # the backend did not say: not counted as 0
            summary.usage_unknown += 1
        summary.input_tokens += int(inputs or 0)
        summary.output_tokens += int(outputs or 0)
        rescored = record.get("rescored")
        missing = _count(rescored.get("not_run")) if isinstance(rescored, dict) else 0
        if missing:
            summary.not_run = (summary.not_run[0] + 1, summary.not_run[1] + missing)
        cached = usage.get("cached")
        if isinstance(cached, dict):
            summary.cached_calls += _count(cached.get("calls"))
            summary.cached_tokens += _count(cached.get("input_tokens"))
            summary.cached_tokens += _count(cached.get("output_tokens"))
    sessions = progress.get("sessions", [])
    summary.sessions = len(sessions)
    summary.wall_time_s = sum(float(s.get("elapsed_s", 0.0)) for s in sessions)
    summary.attempts_histogram = dict(histogram)
    summary.top_reasons = reasons.most_common(5)
    summary.foreign = sum(1 for _ in foreign_records(run_dir.iter_records(), hashes))
    return summary
