"""``python -m benchmarks.scale``: batch runs on the local and the Ray executor, side by side.

Each row is one ``run_batch`` over a generated dataset with the scripted backend (0 ms and
20 ms a reply), in a fresh process of its own, so the memory measured is that run's
driver alone. A thread in that process samples, every 0.05 s, the records file's size (the
prompts done: records are all about the same size) and the process's RSS. It reports:

- prompts per second over the whole session, and over its first and last 10% (a run that
  slows as it grows shows a last/first ratio under 1);
- the driver's peak RSS, and its growth over the RSS just before the run started (Ray's
  own driver libraries, loaded by ``ray.init``, are part of that growth: compare rows),
  through the end of the run: the summary and the report ``samplehooks run`` prints.

Both executors keep the same number of prompts in flight (local: ``max_concurrent_prompts``
= workers x calls per worker). The ``--million`` row is a 1,000,000-prompt Ray run on the
scripted backend at 0 ms: its peak RSS minus the 100,000-prompt Ray row's is the driver's
memory growth with the dataset. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.datasets import write_prompts
from benchmarks.memory import rss_mb

__all__ = ["ScaleRow", "main", "measure"]

WORKERS, CALLS_PER_WORKER = 2, 16


@dataclass(slots=True)
class ScaleRow:
    """One measured run."""

    executor: str
    latency_ms: float
    prompts: int
    prompts_per_s: float
    first_10pct_per_s: float
    last_10pct_per_s: float
    rss_before_mb: float
    rss_peak_mb: float
    rss_sampling_peak_mb: float = 0.0
    """The peak while prompts were being sampled (before the end-of-run summary)."""

    @property
    def growth_mb(self) -> float:
        """Peak RSS over the RSS before the run."""
        return self.rss_peak_mb - self.rss_before_mb


def measure(executor: str, latency_ms: float, dataset: Path, count: int, out: Path) -> ScaleRow:
    """Run the whole dataset once, in this process, watching the records file and the RSS."""
    from sampling_core.runs import RunConfig, run_batch_sync
    from sampling_core.runs.reports.report import build_report

    config = RunConfig.model_validate(
        {
            "dataset": {"path": str(dataset)},
            "backend": {
                "kind": "scripted",
                "replies": ["a short answer"],
                "latency_s": latency_ms / 1000,
            },
            "requirements": [{"max_words": 5}],
            "run": {
                "executor": executor,
                "max_concurrent_prompts": WORKERS * CALLS_PER_WORKER,
                "ray": {"workers": WORKERS, "calls_per_worker": CALLS_PER_WORKER},
                "flush_every": 64,
                "progress": "off",
            },
        }
    )
    samples: list[tuple[float, int]] = []
    peak = [rss_mb()]
    sampling_peak = [peak[0]]
    stop = threading.Event()
    records = out / "records.jsonl"
    progress_file = out / "progress.json"

    def watch() -> None:
        while not stop.wait(0.05):
            rss = rss_mb()
            with contextlib.suppress(FileNotFoundError):
                samples.append((time.perf_counter(), records.stat().st_size))
                if progress_file.exists() and '"state": "running"' in progress_file.read_text():
                    sampling_peak[0] = max(sampling_peak[0], rss)
            peak[0] = max(peak[0], rss)

    before = rss_mb()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    started = time.perf_counter()
    try:
        run_batch_sync(config, out, log=lambda message: None)
        build_report(out).render()  # what `samplehooks run` prints at the end
    finally:
        stop.set()
        watcher.join()
    samples.append((time.perf_counter(), records.stat().st_size))
    peak[0] = max(peak[0], rss_mb())
    progress = json.loads((out / "progress.json").read_text())
    elapsed = progress["sessions"][-1]["elapsed_s"] or (time.perf_counter() - started)
    first, last = _edge_rates(samples, count)
    return ScaleRow(
        executor, latency_ms, count, count / elapsed, first, last, before, peak[0], sampling_peak[0]
    )


def _edge_rates(samples: list[tuple[float, int]], count: int) -> tuple[float, float]:
    """Prompts per second over the first and the last tenth of the records written."""
    started = next((t for t, size in samples if size > 0), samples[0][0])
    total = samples[-1][1]
    ended = next(t for t, size in samples if size >= total)  # the last record, not the exit

    def when(fraction: float) -> float:
        return next(t for t, size in samples if size >= fraction * total)

    head = when(0.1) - started
    tail = ended - when(0.9)
    tenth = count / 10
    return (tenth / head if head > 0 else 0.0), (tenth / tail if tail > 0 else 0.0)


def _child(spec: dict[str, Any]) -> ScaleRow:
    """Measure one row in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.scale", "--child", json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{spec}: {done.stderr[-2000:]}")
    return ScaleRow(**json.loads(done.stdout.strip().splitlines()[-1]))


def render(rows: list[ScaleRow]) -> str:
    """The table."""
    lines = [
        "executor  latency  prompts     prompts/s  first 10%  last 10%  last/first  "
        "RSS before  RSS peak  growth  peak while sampling",
    ]
    for r in rows:
        ratio = r.last_10pct_per_s / r.first_10pct_per_s if r.first_10pct_per_s else 0.0
        lines.append(
            f"{r.executor:<9} {r.latency_ms:>4.0f} ms  {r.prompts:>9,}  {r.prompts_per_s:>9,.0f}  "
            f"{r.first_10pct_per_s:>9,.0f}  {r.last_10pct_per_s:>8,.0f}  {ratio:>9.2f}  "
            f"{r.rss_before_mb:>7.0f} MB  {r.rss_peak_mb:>5.0f} MB  {r.growth_mb:>4.0f} MB  "
            f"{r.rss_sampling_peak_mb:>6.0f} MB"
        )
    return "\n".join(lines)


def checks(rows: list[ScaleRow]) -> dict[str, Any]:
    """The targets, where the rows measured them."""
    out: dict[str, Any] = {}
    by = {(r.executor, r.latency_ms, r.prompts): r for r in rows}
    for (executor, latency, count), row in by.items():
        local = by.get(("local", latency, count))
        if executor == "ray" and latency == 20 and local is not None:
            out[f"ray/local prompts/s at 20 ms, {count:,} prompts (>= 0.5)"] = round(
                row.prompts_per_s / local.prompts_per_s, 2
            )
        if count >= 100_000 and row.first_10pct_per_s:
            out[f"{executor} {latency:.0f} ms {count:,}: last/first 10% (>= 0.8)"] = round(
                row.last_10pct_per_s / row.first_10pct_per_s, 2
            )
    big, million = by.get(("ray", 0, 100_000)), by.get(("ray", 0, 1_000_000))
    if big is not None and million is not None:
        out["ray driver peak RSS, 1,000,000 minus 100,000 prompts, MB (< 100)"] = round(
            million.rss_peak_mb - big.rss_peak_mb, 1
        )
        out["ray driver peak RSS while sampling, 1,000,000 minus 100,000, MB"] = round(
            million.rss_sampling_peak_mb - big.rss_sampling_peak_mb, 1
        )
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the rows asked for; print the table and one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scale", description=__doc__)
    parser.add_argument("--executors", default="local,ray", help="comma-separated: local,ray")
    parser.add_argument("--latencies", default="0,20", help="scripted latencies in ms")
    parser.add_argument("--sizes", default="10000,100000", help="prompts per run")
    parser.add_argument(
        "--million", action="store_true", help="also the 1,000,000-prompt Ray run (0 ms)"
    )
    parser.add_argument("--quick", action="store_true", help="smoke mode: 300 prompts, local")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        spec = json.loads(args.child)
        row = measure(
            spec["executor"],
            spec["latency_ms"],
            Path(spec["dataset"]),
            spec["count"],
            Path(spec["out"]),
        )
        print(json.dumps(asdict(row)))
        return 0
    if args.quick:
        args.executors, args.latencies, args.sizes = "local", "0,20", "300"
    plan = [
        (executor, float(latency), int(size))
        for size in args.sizes.split(",")
        for latency in args.latencies.split(",")
        for executor in args.executors.split(",")
    ]
    if args.million:
        plan.append(("ray", 0.0, 1_000_000))
    rows: list[ScaleRow] = []
    with tempfile.TemporaryDirectory(prefix="samplehooks-scale-") as tmp:
        datasets: dict[int, Path] = {}
        for number, (executor, latency, size) in enumerate(plan):
            if size not in datasets:
                datasets[size] = write_prompts(Path(tmp) / f"d{size}.jsonl", size, ids=False)
            spec = {
                "executor": executor,
                "latency_ms": latency,
                "dataset": str(datasets[size]),
                "count": size,
                "out": str(Path(tmp) / f"run{number}"),
            }
            rows.append(_child(spec))
            print(render(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(render(rows))
    found = checks(rows)
    for label, value in found.items():
        print(f"  {label}: {value}")
    print(json.dumps({"rows": [asdict(r) for r in rows], "checks": found}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
