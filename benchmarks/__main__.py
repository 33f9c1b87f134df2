"""``python -m benchmarks [--quick] [--repeats N] [--only a,b]``: the table, then one JSON line."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import sys

from benchmarks import mellea_baseline
from benchmarks.fakes import configure_logging
from benchmarks.report import Row, json_line, machine, render_table, summary
from benchmarks.runners import Settings
from benchmarks.scenarios import SCENARIOS
from benchmarks.soak import SMOKE_CALLS, SoakReport, soak


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="The samplehooks engine against a bare asyncio loop and Mellea 0.8.",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smoke mode: every scenario with tiny counts (checks they run; timings mean little)",
    )
    parser.add_argument("--repeats", type=int, help="timed repetitions per measurement (≥ 5)")
    parser.add_argument("--calls", type=int, help="sample() calls per timed batch")
    parser.add_argument("--many", type=int, help="concurrent calls in the many-calls scenario")
    parser.add_argument(
        "--only",
        help=f"comma-separated scenarios to run, among: {', '.join(SCENARIOS)}",
    )
    return parser.parse_args(argv)


def settings_from(args: argparse.Namespace) -> Settings:
    """The measurement settings the arguments ask for."""
    settings = Settings.smoke() if args.quick else Settings()
    changes = {
        name: value
        for name in ("repeats", "calls", "many")
        if (value := getattr(args, name)) is not None
    }
    for name, value in changes.items():
        if value < 1:
            raise SystemExit(f"--{name} must be at least 1, got {value}")
    return dataclasses.replace(settings, **changes)


async def run(names: list[str], settings: Settings) -> list[Row]:
    """Run the named scenarios in order, reporting progress on stderr.

    The process's long-lived heap (its imports, Mellea's included) is frozen first, so
    that the garbage collector's full passes do not rescan it: they would charge every
    implementation for modules a real application using it would not even load.
    """
    gc.collect()
    gc.freeze()
    rows: list[Row] = []
    for name in names:
        print(f"benchmarks: running {name} ...", file=sys.stderr, flush=True)
        rows += await SCENARIOS[name](settings)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks; print the table, then the JSON line. Exit 0 when they ran."""
    args = parse_args(argv)
    settings = settings_from(args)
    names = list(SCENARIOS) if not args.only else [n.strip() for n in args.only.split(",")]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown scenario(s) {unknown}; choose among {list(SCENARIOS)}")
    configure_logging()
    started = machine()
    missing = mellea_baseline.available()
    if missing is not None:
        print(f"benchmarks: Mellea column is n/a ({missing})", file=sys.stderr)
    rows = asyncio.run(run(names, settings))
    soaked = run_soak() if settings.quick else None  # its short form, reported on stderr
    mode = "quick smoke mode: timings are not meaningful" if settings.quick else "full"
    print(f"samplehooks benchmarks ({mode}); medians of {settings.repeats} run(s)")
    print(
        f"machine: {started['cpus']} CPUs, {started['cpu_model']}, Python {started['python']}, "
        f"load average at start {started['load_average']}"
    )
    print()
    print(render_table(rows))
    print()
    counts = summary(rows)
    print(f"targets: {counts['met']} met, {counts['missed']} missed, {counts['n/a']} n/a")
    print(json_line(rows, dataclasses.asdict(settings), started))
    return 0 if soaked is None or soaked.passed else 1


def run_soak() -> SoakReport:
    """The soak's short form (``benchmarks.soak``): its lines go to stderr."""
    print(f"benchmarks: running soak ({SMOKE_CALLS:,} calls) ...", file=sys.stderr, flush=True)
    report = asyncio.run(soak(SMOKE_CALLS))
    print(report.render(), file=sys.stderr)
    return report


if __name__ == "__main__":
    sys.exit(main())
