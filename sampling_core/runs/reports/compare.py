"""Two runs compared prompt by prompt (``samplehooks compare A B``): is B better than A?

The prompts are matched by key. For each measure both runs have (the success rate, and
pass@k, pass^k and maj@k at each k both measured), every prompt in both contributes its
pair of values, and :func:`~sampling_core.runs.stats.paired.paired_difference` gives the paired
difference ``B - A``, its 95% bootstrap interval over prompts, McNemar's exact p-value when
the measure is pass or fail per prompt, the verdict and the smallest difference this many
prompts could detect. A measure's values per prompt are those of the run's report: the
success rate counts each prompt's latest record (ok, or not: failed or error; a prompt
whose outcome is not known counts in neither run), pass@k, pass^k and maj@k its first
samples, with the samples whose outcome is not known left out (their ``n`` reduced).

Both runs' indexes are read in key order and merged as they come: memory holds the
counts of each distinct pair of values and the first flipped prompts, not the runs.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sampling_core.runs.errors import RunError
from sampling_core.runs.reports.report import report_of
from sampling_core.runs.stats.majk import Profile, maj_at_k, maj_ks, profile_of
from sampling_core.runs.stats.paired import PairedDifference, paired_difference
from sampling_core.runs.stats.passk import ks_for, pass_at_k, pass_hat_k
from sampling_core.runs.store.index import RunIndex, outcome

__all__ = [
    "FLIPPED_SHOWN",
    "RunComparison",
    "compare_indexes",
    "compare_runs",
    "success_of",
]

FLIPPED_SHOWN = 200
"""Flipped prompts listed each way (by key); the counts are of all of them."""

_BY_KEY = (
    f"SELECT l.key, {outcome('r')}, r.hash, f.n, f.c, f.votes FROM latest l "
    "JOIN rec r ON r.line = l.line LEFT JOIN first fi ON fi.key = l.key "
    "LEFT JOIN rec f ON f.line = fi.line ORDER BY l.key"
)
_PASS = {"ok": 1.0, "failed": 0.0, "error": 0.0}


def success_of(status: str) -> float | None:
    """A prompt's success by the status of its latest record: 1 when ok, 0 when failed or
    errored, ``None`` (left out, never a pass) for any other (an outcome not known)."""
    return _PASS.get(status)


@dataclass(slots=True)
class RunComparison:
    """Run B against run A over the prompts both have."""

    a: str
    b: str
    both: int = 0
    """Prompts in both runs (matched by key)."""
    only_a: int = 0
    only_b: int = 0
    content_differs: int = 0
    """Prompts in both whose dataset line differs (another content hash)."""
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The settings of the checks that differ: ``{setting: {"a": ..., "b": ...}}``."""
    rescored_from: tuple[str | None, str | None] = (None, None)
    measures: list[PairedDifference] = field(default_factory=list)
    better_in_b: list[str] = field(default_factory=list)
    """The first prompts (by key) ok in B and not in A."""
    better_in_a: list[str] = field(default_factory=list)
    flipped: tuple[int, int] = (0, 0)
    """How many prompts flipped: ``(to ok in B, to ok in A)``."""
    not_known: int = 0
    """Prompts in both left out of the success rate (an outcome not known in a run)."""
    notes: list[str] = field(default_factory=list)
    """What was not compared, and why."""
    vote_weights: tuple[str | None, str | None] = (None, None)
    """What each run's vote weighed answers by (``None``: counted once each); when either
    did, maj@k (which counts each sample once) is labelled unweighted."""

    @property
    def maj_unweighted(self) -> bool:
        """Whether maj@k is labelled unweighted (a run's vote weighed answers)."""
        return self.vote_weights != (None, None)

    def measure(self, name: str, k: int | None = None) -> PairedDifference | None:
        """The comparison of one measure (``success_rate``, ``pass@k``, ``pass^k``,
        ``maj@k``) at ``k``, or ``None`` when the runs do not both have it."""
        return next((m for m in self.measures if (m.measure, m.k) == (name, k)), None)

    def as_dict(self) -> dict[str, Any]:
        """As JSON-ready data (``samplehooks compare --json``)."""
        return {
            "a": self.a,
            "b": self.b,
            "prompts": {
                "both": self.both,
                "only_a": self.only_a,
                "only_b": self.only_b,
                "content_differs": self.content_differs,
                "not_known": self.not_known,
            },
            "checks_differ": bool(self.checks),
            "checks": self.checks,
            "rescored_from": {"a": self.rescored_from[0], "b": self.rescored_from[1]},
            "measures": [self._measure_dict(m) for m in self.measures],
            "vote_weight": {"a": self.vote_weights[0], "b": self.vote_weights[1]},
            "notes": self.notes,
            "flipped": {
                "better_in_b": self.flipped[0],
                "better_in_a": self.flipped[1],
                "better_in_b_keys": self.better_in_b,
                "better_in_a_keys": self.better_in_a,
            },
        }

    def _measure_dict(self, measure: PairedDifference) -> dict[str, Any]:
        data = measure.as_dict()
        if measure.measure == "maj@k" and self.maj_unweighted:
            data["unweighted"] = True
        return data

    def _label(self, m: PairedDifference) -> str:
        """A measure's name in the text (maj@k said unweighted when it is)."""
        unweighted = m.measure == "maj@k" and self.maj_unweighted
        return f"{m.label} unweighted" if unweighted else m.label

    def render(self) -> str:
        """The comparison as text, as ``samplehooks compare`` prints it."""
        lines = [f"A: {self.a}", f"B: {self.b}"]
        only = [f"{n} only in {run}" for n, run in ((self.only_a, "A"), (self.only_b, "B")) if n]
        lines.append(
            f"Prompts: {self.both} in both (matched by key)"
            + (f"; {', '.join(only)} (left out)" if only else "")
        )
        if self.content_differs:
            lines.append(
                f"  note: {self.content_differs} of them differ in their dataset line "
                "(another prompt text or requirements under the same key)"
            )
        if self.checks:
            lines.append("The runs' checks differ (a rescore, or other requirements):")
            for name, pair in self.checks.items():
                lines.append(f"  {name}: A {_short(pair['a'])}  B {_short(pair['b'])}")
        lines.append("B - A, paired over prompts (95% bootstrap interval):")
        labels = [self._label(m) for m in self.measures]
        width = max([13, *(len(label) + 1 for label in labels)])  # a space after the longest
        for m, label in zip(self.measures, labels, strict=True):
            test = f"  McNemar p={m.p_value:.3g}" if m.p_value is not None else ""
            detect = (
                ""
                if m.detectable is None
                else f"  detectable ±{100 * m.detectable:.1f}"
                if m.detectable < 1
                else "  too few prompts to detect any difference"
            )
            lines.append(
                f"  {label:<{width}}{100 * m.a:5.1f}% -> {100 * m.b:5.1f}%  "
                f"{100 * m.difference:+5.1f} [{100 * m.low:+5.1f}, {100 * m.high:+5.1f}]  "
                f"{m.verdict}{test}{detect}  ({m.prompts} prompts)"
            )
        if self.not_known:
            lines.append(f"  {self.not_known} prompts left out of the success rate: not known")
        lines += [f"  note: {note}" for note in self.notes]
        to_b, to_a = self.flipped
        lines.append(f"Flipped: {to_b} prompts ok only in B, {to_a} ok only in A")
        for label, keys, count in (("B", self.better_in_b, to_b), ("A", self.better_in_a, to_a)):
            if keys:
                more = f" (first {len(keys)} of {count})" if count > len(keys) else ""
                lines.append(f"  ok only in {label}{more}: {', '.join(keys[:10])}")
        return "\n".join(lines)


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def compare_runs(
    path_a: str | Path, path_b: str | Path, *, flipped: int = FLIPPED_SHOWN
) -> RunComparison:
    """Run B (``path_b``) against run A (``path_a``), prompt by prompt; lists the first
    ``flipped`` prompts (by key) that are ok in one run only, each way.

    Raises :class:`~sampling_core.runs.errors.RunDirError` when a directory is missing or
    not a run, and :class:`~sampling_core.runs.errors.RunError` when no prompt is in both.
    """
    with contextlib.ExitStack() as stack:
        a = stack.enter_context(RunIndex.open(path_a))
        b = stack.enter_context(RunIndex.open(path_b))
        return compare_indexes(a, b, flipped=flipped)


@dataclass(slots=True)
class _Side:
    """One run's values of one prompt."""

    key: str
    status: str
    hash: str | None
    n: int
    c: int
    votes: Profile | None


def _sides(index: RunIndex) -> Iterator[_Side]:
    for key, status, hash_, n, c, votes in index.query(_BY_KEY):
        profile = profile_of(json.loads(votes)) if votes else None
        yield _Side(key, status, hash_, n or 0, c or 0, profile)


def _pairs(a: RunIndex, b: RunIndex) -> Iterator[tuple[_Side | None, _Side | None]]:
    """Both runs' prompts merged by key: ``(a, b)``, ``None`` where a run lacks the key."""
    left, right = _sides(a), _sides(b)
    x, y = next(left, None), next(right, None)
    while x is not None or y is not None:
        if y is None or (x is not None and x.key < y.key):
            yield x, None
            x = next(left, None)
        elif x is None or y.key < x.key:
            yield None, y
            y = next(right, None)
        else:
            yield x, y
            x, y = next(left, None), next(right, None)


def compare_indexes(a: RunIndex, b: RunIndex, *, flipped: int = FLIPPED_SHOWN) -> RunComparison:
    """:func:`compare_runs` of two indexed runs."""
    report_a, report_b = report_of(a, top=0), report_of(b, top=0)
    out = RunComparison(str(a.run_dir.path), str(b.run_dir.path))
    out.checks = _checks_that_differ(a.meta, b.meta)
    out.rescored_from = (report_a.summary.rescored_from, report_b.summary.rescored_from)
    samples = not report_a.early_exit and not report_b.early_exit
    if report_a.early_exit != report_b.early_exit:
        one = "B" if report_a.early_exit else "A"
        out.notes.append(
            f"only {one} sampled every prompt several times (budgets.early_exit: false): "
            "pass@k, pass^k and maj@k are compared only between two such runs"
        )
    out.vote_weights = (report_a.vote_weight, report_b.vote_weight)
    for run, weight in (("A", out.vote_weights[0]), ("B", out.vote_weights[1])):
        if samples and weight is not None:
            out.notes.append(
                f"{run}'s vote weighed answers by {weight}; maj@k counts each sample once "
                "(unweighted), so it is not the accuracy of that vote"
            )
    for run, report in (("A", report_a), ("B", report_b)):
        prompts, attempts = report.summary.not_run
        if prompts:
            out.notes.append(
                f"{run} is a rescore that judged {prompts} prompts on fewer attempts than its "
                f"checks would have made ({attempts} never ran: the source had stopped them "
                "early); a failure there might have passed had they run"
            )
        known = [f"pass@{p.k} {100 * p.value:.1f}%{p.note()}" for p in report.pass_at_k]
        if samples and report.not_known[0] and known:
            out.notes.append(
                f"{run} has {report.not_known[0]} samples not known (a rescore could not judge "
                f"them, in {report.not_known[1]} prompts): pass@k and pass^k compare its known "
                f"samples only; {run} alone: {', '.join(known)}"
            )
    success: Counter[tuple[float, float]] = Counter()
    tables: dict[tuple[str, int], Counter[tuple[float, float]]] = {}
    to_b = to_a = 0
    for x, y in _pairs(a, b):
        if x is None:
            out.only_b += 1
            continue
        if y is None:
            out.only_a += 1
            continue
        out.both += 1
        out.content_differs += x.hash != y.hash
        va, vb = success_of(x.status), success_of(y.status)
        if va is None or vb is None:
            out.not_known += 1
        else:
            success[(va, vb)] += 1
            if vb > va:
                to_b += 1
                if len(out.better_in_b) < flipped:
                    out.better_in_b.append(x.key)
            elif va > vb:
                to_a += 1
                if len(out.better_in_a) < flipped:
                    out.better_in_a.append(x.key)
        if samples:
            _add_samples(tables, x, y)
    if not out.both:
        raise RunError(
            f"no prompt is in both runs ({out.only_a} only in {out.a}, {out.only_b} only in "
            f"{out.b}): compare runs of the same dataset (prompts are matched by key)"
        )
    out.flipped = (to_b, to_a)
    found = paired_difference("success_rate", success)
    out.measures = [found] if found is not None else []
    for name in ("pass@k", "pass^k", "maj@k"):
        for k in sorted(k for (m, k) in tables if m == name):
            found = paired_difference(name, tables[(name, k)], k=k)
            if found is not None:
                out.measures.append(found)
    return out


def _add_samples(
    tables: dict[tuple[str, int], Counter[tuple[float, float]]], x: _Side, y: _Side
) -> None:
    """Add one prompt's pass@k, pass^k and maj@k pairs at every k both runs' samples allow."""
    for k in ks_for(min(x.n, y.n)):
        pair = (pass_at_k(x.n, x.c, k), pass_at_k(y.n, y.c, k))
        tables.setdefault(("pass@k", k), Counter())[pair] += 1
        pair = (pass_hat_k(x.n, x.c, k), pass_hat_k(y.n, y.c, k))
        tables.setdefault(("pass^k", k), Counter())[pair] += 1
    if x.votes is not None and y.votes is not None:
        size_a = sum(size for size, _ in x.votes)
        size_b = sum(size for size, _ in y.votes)
        for k in maj_ks(min(size_a, size_b)):
            pair = (maj_at_k(x.votes, k), maj_at_k(y.votes, k))
            tables.setdefault(("maj@k", k), Counter())[pair] += 1


def _checks_that_differ(meta_a: dict[str, Any], meta_b: dict[str, Any]) -> dict[str, Any]:
    """The settings of the runs' checks (the config's requirements, the field of the
    dataset that holds each line's own) that differ between the two runs."""

    def checks(meta: dict[str, Any]) -> dict[str, Any]:
        settings = meta.get("settings") if isinstance(meta.get("settings"), dict) else {}
        values = settings.get("values") if isinstance(settings.get("values"), dict) else {}
        return {
            name: value
            for name, value in values.items()
            if name.startswith("requirements") or name == "dataset.requirements_field"
        }

    left, right = checks(meta_a), checks(meta_b)
    return {
        name: {"a": left.get(name), "b": right.get(name)}
        for name in sorted(left.keys() | right.keys())
        if left.get(name) != right.get(name)
    }
