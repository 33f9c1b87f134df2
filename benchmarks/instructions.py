"""Instructions per attempt, with and without plugins: ``python -m benchmarks.instructions``.

Wall time on a shared machine moves with its load; the number of instructions the CPU runs
does not. This runs ``sample()`` calls (``loop_budget=4``, zero-latency backend, never
passing) under valgrind's callgrind, twice per variant with different numbers of calls, so
that start-up and imports cancel out, and prints the instructions per attempt of each
variant and their ratio to the no-plugin count. Hash randomisation and address-space
randomisation are turned off so that two runs count the same. Needs valgrind
(``apt install valgrind``); each variant takes about a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import re
import shutil
import subprocess
import sys

from benchmarks.fakes import FakeModel, TrivialPlugin, configure_logging, engine_runner
from sampling_core.engine import loop as loop_module
from sampling_core.engine import suspension
from sampling_core.engine.subsample_tasks import AnyioSubsampleTasks

VARIANTS = ("no plugin", "trivial plugin on every hook")
TASK_GROUP = "anyio task group (no plugin)"
"""A variant run only when asked (``--variants``): the subsamples started by an anyio task
group (``AnyioSubsampleTasks``) instead of the engine's plain asyncio tasks."""
LOOP_BUDGET = 4
FEW, MANY = 100, 400  # sample() calls of the two counted runs
WARMUP = 50
VALGRIND_SLOWDOWN = 100
"""How much slower the engine runs under callgrind (measured: about 14 µs per attempt natively,
1.5 ms under callgrind). The engine adds a schedule point once a millisecond passed without a
yield (``sampling_core.engine.suspension``); the child scales that interval by this factor, so that
the counted runs pay for as many checkpoints per attempt as a native run does."""


NO_SCHEDULE_POINTS = "SAMPLEHOOKS_BENCH_NO_SCHEDULE_POINTS"
"""Set (by ``--no-schedule-points``) in the counted children's environment: the engine's
schedule points are then never due, so two runs of one tree count the same whatever the load."""


def run_calls(variant: str, calls: int, concurrency: int) -> list[str]:
    """Make ``calls`` sample() calls (after a warm-up), as one counted run does.

    Returns what the run was, as lines: the backend calls made in all (warm-up included),
    the plugins registered, the subsample runner the loop used and the schedule points.
    """
    configure_logging()  # as the wall-time benchmarks do
    if os.environ.get(NO_SCHEDULE_POINTS):
        suspension.SCHEDULE_INTERVAL_S = float("inf")
        schedule_points = "off"
    else:
        suspension.SCHEDULE_INTERVAL_S *= VALGRIND_SLOWDOWN
        schedule_points = f"after {suspension.SCHEDULE_INTERVAL_S * 1000:g} ms without a yield"
    plugins = [TrivialPlugin()] if variant == VARIANTS[1] else []
    if variant == TASK_GROUP:
        loop_module.subsample_tasks = AnyioSubsampleTasks  # type: ignore[assignment]
    model = FakeModel()
    run = engine_runner(
        model, loop_budget=LOOP_BUDGET, concurrency_budget=concurrency, plugins=plugins
    )

    async def many(count: int) -> None:
        for _ in range(count):
            await run()

    asyncio.run(many(WARMUP))
    gc.collect()
    gc.freeze()
    asyncio.run(many(calls))
    return [
        f"backend calls: {model.calls}",
        f"plugins: {', '.join(type(p).__name__ for p in plugins) or 'none'}",
        f"subsample runner: {getattr(loop_module.subsample_tasks, '__name__', '?')}",
        f"schedule points: {schedule_points}",
    ]


def collected(valgrind_output: str) -> int:
    """The instruction count callgrind prints (``==pid== Collected : 123,456``)."""
    found = re.search(r"Collected\s*:\s*([\d,]+)", valgrind_output)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{valgrind_output}")
    return int(found.group(1).replace(",", ""))


def count(variant: str, calls: int, concurrency: int, schedule_points: bool = True) -> int:
    """Instructions of one whole process making ``calls`` calls, under callgrind."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "benchmarks.instructions",
        "--child",
        variant,
        str(calls),
        str(concurrency),
    ]
    if shutil.which("setarch"):
        command = ["setarch", platform.machine(), "-R", *command]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=True,
        env={
            **os.environ,
            "PYTHONHASHSEED": "0",
            NO_SCHEDULE_POINTS: "" if schedule_points else "1",
        },
    )
    return collected(done.stderr)


def per_attempt(variant: str, concurrency: int, schedule_points: bool = True) -> float:
    """Instructions per attempt: the difference of two runs over their difference in attempts."""
    many = count(variant, MANY, concurrency, schedule_points)
    extra = many - count(variant, FEW, concurrency, schedule_points)
    return extra / ((MANY - FEW) * LOOP_BUDGET * concurrency)


def main(argv: list[str] | None = None) -> None:
    """Count every variant at every concurrency and print the table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.instructions")
    parser.add_argument("--concurrency", default="1,4", help="comma-separated, e.g. 1,4")
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"comma-separated, among: {', '.join((*VARIANTS, TASK_GROUP))}",
    )
    parser.add_argument(
        "--no-schedule-points",
        action="store_true",
        help="never due: counts that do not move with the machine's load (compare like with like)",
    )
    parser.add_argument("--child", nargs=3, metavar=("VARIANT", "CALLS", "CONCURRENCY"))
    args = parser.parse_args(argv)
    if args.child:
        variant, calls, concurrency = args.child
        print("\n".join(run_calls(variant, int(calls), int(concurrency))))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is needed: apt install valgrind")
    variants = [v.strip() for v in args.variants.split(",")]
    unknown = [v for v in variants if v not in (*VARIANTS, TASK_GROUP)]
    if unknown:
        raise SystemExit(f"unknown variant(s) {unknown}; choose among {[*VARIANTS, TASK_GROUP]}")
    print(f"| concurrency | variant | instructions per attempt | ÷ {variants[0]} |")
    print("|---|---|---|---|")
    for concurrency in (int(c) for c in args.concurrency.split(",")):
        base = None
        for variant in variants:
            value = per_attempt(variant, concurrency, not args.no_schedule_points)
            base = base or value
            print(f"| {concurrency} | {variant} | {value / 1000:.1f} k | {value / base:.2f} |")


if __name__ == "__main__":
    main()
