"""``python -m benchmarks.run_end``: the wall time of a run's end with the recorder and MLflow.

It makes one scripted run of ``--prompts`` prompts, then times, each in a fresh interpreter,
a ``samplehooks run --resume`` of the finished run with tracing and the ``mlflow`` plugin
on (a local SQLite tracking store; the recorder cannot be added on a resume, and its
``run_end`` never read the run): nothing is left to sample, so the time is
the session's start (reading the run to resume it) and its end (``run_end``: the report,
MLflow's metrics and artifacts, the summary), which is what reading a run once at its end
changed. ``report`` is timed too: one reading of the run, for scale. It also counts
the full readings of ``records.jsonl`` each step made.

``--code DIR`` runs the steps with another checkout of samplehooks on the path (an older
version, to compare: ``git archive COMMIT | tar -x -C DIR``); the run is made by that code.
Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.datasets import write_prompts
from benchmarks.run_memory import write_config  # the same scripted run: two samples a prompt

__all__ = ["main"]

_CHILD = """
import json, sys, time
from sampling_core.cli.app import app
from sampling_core.runs.store.store import RunDirectory
reads = []
reader = RunDirectory._read_records
def counted(self, scan):
    reads.append(str(self.path))
    return reader(self, scan)
RunDirectory._read_records = counted
args = json.loads(sys.argv[1])
started = time.perf_counter()
try:
    code = app(args, standalone_mode=False)
except SystemExit as exc:
    code = exc.code
if code:
    raise SystemExit(f"samplehooks {args[0]} exited with {code}")
print(json.dumps({"seconds": time.perf_counter() - started, "reads": len(reads)}))
"""


def step(code: Path, args: list[str], cwd: Path) -> dict[str, Any]:
    """Run ``samplehooks ARGS`` in a fresh interpreter with ``code`` first on the path."""
    env = {**os.environ, "PYTHONPATH": str(code), "SAMPLEHOOKS_RECORDER_PATH": "events.jsonl"}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(args)],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=env,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{args[0]}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    """Make the run, time its resume and its report; print the table and one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run_end", description=__doc__)
    parser.add_argument("--prompts", type=int, default=100_000)
    parser.add_argument("--code", type=Path, default=Path(__file__).resolve().parent.parent)
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="samplehooks-run-end-") as folder:
        scratch = Path(folder)
        dataset = write_prompts(scratch / "d.jsonl", options.prompts, ids=True)
        config = write_config(scratch / "c.yaml", dataset)
        out = scratch / "run"
        made = step(options.code, ["run", str(config), "--out", str(out)], scratch)
        plugins = ["--plugin", "tracing"]  # the recorder would change the run's artifacts
        plugins += ["--plugin", f"mlflow:tracking_uri=sqlite:///{scratch / 'ml.db'}"]
        resume = ["run", str(config), "--out", str(out), "--resume", *plugins]
        resumed = step(options.code, resume, scratch)
        reported = step(options.code, ["report", str(out)], scratch)
    rows = {"run": made, "resume (end of a run)": resumed, "report": reported}
    print(f"{'step':<24}{'seconds':>10}{'full reads':>12}   ({options.prompts:,} prompts)")
    for name, row in rows.items():
        print(f"{name:<24}{row['seconds']:>10.1f}{row['reads']:>12}")
    print(json.dumps({"prompts": options.prompts, "code": str(options.code), **rows}))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
