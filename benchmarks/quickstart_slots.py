"""``python -m benchmarks.quickstart_slots [N ...]``: the quickstart at N prompts in flight.

Runs ``examples/quickstart.yaml`` (24 prompts on the embedded SmolLM2-135M through llama.cpp)
once per N (default 1, 2, 4, 8) with ``run.max_concurrent_prompts = N`` and as many llama.cpp
slots, into a temporary run directory, and prints per N: the wall time of the whole run (the
model's start included, as a user waits for it), generated tokens, generated tokens per
second, prompts per second and the success rate, then one JSON line. The load average is
printed before and after, since the machine may be shared: compare runs made together.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from sampling_core.runs import load_config, run_batch_sync

CONFIG = Path(__file__).resolve().parent.parent / "examples" / "quickstart.yaml"


def measure(in_flight: int) -> dict[str, float | int]:
    """One run of the quickstart with ``in_flight`` prompts at once (and as many slots)."""
    config = load_config(CONFIG)
    run = config.run.model_copy(update={"max_concurrent_prompts": in_flight})
    backend = config.backend.model_copy(update={"parallel": in_flight})
    config = config.model_copy(update={"run": run, "backend": backend})
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        summary = run_batch_sync(config, Path(tmp) / "run", log=lambda message: None)
        wall = time.perf_counter() - started
    return {
        "in_flight": in_flight,
        "wall_s": round(wall, 2),
        "output_tokens": summary.output_tokens,
        "tokens_per_s": round(summary.output_tokens / wall, 1),
        "prompts_per_s": round(summary.done / wall, 3),
        "ok": summary.ok,
        "done": summary.done,
    }


def main(argv: list[str]) -> None:
    """Measure every N given (default 1 2 4 8) and print a table and a JSON line."""
    counts = [int(a) for a in argv] or [1, 2, 4, 8]
    before = os.getloadavg()
    print(f"load average before: {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}")
    print(f"{'in flight':>9}  {'wall s':>7}  {'out tokens':>10}  {'tokens/s':>8}  {'ok':>5}")
    rows = []
    for n in counts:
        row = measure(n)
        rows.append(row)
        print(
            f"{n:>9}  {row['wall_s']:>7.1f}  {row['output_tokens']:>10}  "
            f"{row['tokens_per_s']:>8.1f}  {row['ok']:>2}/{row['done']}",
            flush=True,
        )
    after = os.getloadavg()
    print(f"load average after: {after[0]:.2f} {after[1]:.2f} {after[2]:.2f}")
    print(json.dumps({"quickstart_slots": rows, "loadavg": [before, after]}))


if __name__ == "__main__":
    main(sys.argv[1:])
