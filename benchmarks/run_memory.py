"""``python -m benchmarks.run_memory``: the peak memory of run, resume, report and view.

For each size (100,000 and 1,000,000 prompts by default) it makes one scripted run and then
reads it back, each step in a fresh interpreter of its own, and prints each step's peak
resident memory (``resource.getrusage(RUSAGE_SELF).ru_maxrss`` at the step's end) and its
resident memory just before the step began (the interpreter and its imports):

- ``run``: ``samplehooks run`` over the dataset, on the scripted backend at 0 ms, with
  ``early_exit: false`` and ``concurrency_budget: 2`` (so the run measures pass@k); the
  engine samples every prompt;
- ``resume``: ``samplehooks run --resume`` on the finished run (nothing left to do);
- ``report``: ``samplehooks report --json`` (printed to ``/dev/null``);
- ``view``: ``samplehooks view DIR -o FILE.html`` (and the page's size).

Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from benchmarks.datasets import write_prompts
from benchmarks.memory import peak_rss_mb, rss_mb

__all__ = ["MemoryRow", "main"]

STEPS = ("run", "resume", "report", "view")


@dataclass(slots=True)
class MemoryRow:
    """One step measured in a process of its own."""

    step: str
    prompts: int
    seconds: float
    rss_before_mb: float
    rss_peak_mb: float
    output_kb: int = 0
    """The size of what the step wrote (the page, the JSON report), in KB."""

    @property
    def growth_mb(self) -> float:
        """Peak over the resident memory before the step."""
        return self.rss_peak_mb - self.rss_before_mb


def write_config(path: Path, dataset: Path) -> Path:
    """The scripted run: two samples a prompt, the second of every prompt passes."""
    config = {
        "dataset": {"path": str(dataset), "id_field": "id"},
        "backend": {"kind": "scripted", "replies": ["far too many words to pass", "red"]},
        "requirements": [{"max_words": 3}],
        "budgets": {"loop_budget": 1, "concurrency_budget": 2, "early_exit": False},
        "run": {"max_concurrent_prompts": 32, "flush_every": 64, "progress": "off"},
        "seed": 7,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def _run_cli(args: list[str], stdout: Path | None = None) -> None:
    from sampling_core.cli.app import app

    with contextlib.ExitStack() as stack:
        if stdout is not None:
            handle = stack.enter_context(stdout.open("w", encoding="utf-8"))
            stack.enter_context(contextlib.redirect_stdout(handle))
        try:
            app(args, standalone_mode=False)
        except SystemExit as exc:  # pragma: no cover - a failed step
            if exc.code:
                raise


def child(spec: dict[str, Any]) -> MemoryRow:
    """Measure one step in this process."""
    import sampling_core.cli.app  # noqa: F401  (the imports are not the step's)

    step, out, count = spec["step"], Path(spec["out"]), spec["count"]
    before = rss_mb()
    started = time.perf_counter()
    written = 0
    if step in ("run", "resume"):
        args = ["run", spec["config"], "--out", str(out)] + (["--resume"] * (step == "resume"))
        _run_cli(args, Path(spec["scratch"]) / f"{step}.txt")
    elif step == "report":
        target = Path(spec["scratch"]) / "report.json"
        _run_cli(["report", str(out), "--json"], target)
        written = target.stat().st_size
        target.unlink()
    elif step == "view":
        target = Path(spec["scratch"]) / "view.html"
        _run_cli(["view", str(out), "-o", str(target)], Path(os.devnull))
        written = target.stat().st_size
    else:
        raise ValueError(step)
    seconds = time.perf_counter() - started
    return MemoryRow(step, count, seconds, before, peak_rss_mb(), written // 1024)


def _child(spec: dict[str, Any]) -> MemoryRow:
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.run_memory", "--child", json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{spec['step']}: {done.stderr[-3000:]}")
    return MemoryRow(**json.loads(done.stdout.strip().splitlines()[-1]))


def render(rows: list[MemoryRow]) -> str:
    """The table."""
    lines = ["step      prompts     time (s)  RSS before  RSS peak  growth   output"]
    for r in rows:
        lines.append(
            f"{r.step:<8} {r.prompts:>9,}  {r.seconds:>9.1f}  {r.rss_before_mb:>7.0f} MB  "
            f"{r.rss_peak_mb:>5.0f} MB  {r.growth_mb:>4.0f} MB  "
            + (f"{r.output_kb:,} KB" if r.output_kb else "-")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure each step at each size; print the table and one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run_memory", description=__doc__)
    parser.add_argument("--sizes", default="100000,1000000", help="prompts per run")
    parser.add_argument("--steps", default=",".join(STEPS), help="among: run,resume,report,view")
    parser.add_argument("--quick", action="store_true", help="smoke mode: 300 prompts")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(asdict(child(json.loads(args.child)))))
        return 0
    sizes = [300] if args.quick else [int(s) for s in args.sizes.split(",")]
    steps = [s for s in args.steps.split(",") if s]
    rows: list[MemoryRow] = []
    with tempfile.TemporaryDirectory(prefix="samplehooks-memory-") as tmp:
        for size in sizes:
            scratch = Path(tmp) / f"s{size}"
            scratch.mkdir()
            dataset = write_prompts(scratch / "dataset.jsonl", size, ids=True)
            config = write_config(scratch / "config.yaml", dataset)
            for step in steps:
                spec = {
                    "step": step,
                    "count": size,
                    "config": str(config),
                    "out": str(scratch / "run"),
                    "scratch": str(scratch),
                }
                rows.append(_child(spec))
                print(render(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
    print(render(rows))
    print(json.dumps({"rows": [asdict(r) for r in rows]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
