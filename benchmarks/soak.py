"""``python -m benchmarks.soak [--calls N]``: many ``sample()`` calls with random faults, and
the memory they leave behind.

One ``Sampler`` (with the tracing, ordering and budget-guard plugins and a plugin that
misbehaves at random) serves ``--calls`` calls, ``--parallel`` at a time, over a backend
that fails at random. Calls end every way a call can end: success, budget exhausted,
stopped by a plugin (``StopSampling``), a plugin failing closed (``PluginError``), a backend
error raised (ordinary, or transient after its retry), a ``BaseException`` from the
backend, and cancellation from outside. Some calls add a per-call plugin.

Memory is measured after a warm-up and again after the soak, each time after a full
garbage collection, as the interpreter's allocated memory blocks
(``sys.getallocatedblocks``: every object and buffer, at no cost while the calls run) and
RSS (for information). The soak passes when the blocks still allocated afterwards stay
within ``--margin-blocks`` of before, every call fired ``sampling_loop_end`` once, and no
task is left running. ``--trace`` also runs ``tracemalloc`` (several times slower) and
names the lines whose allocations were kept. It prints a few lines and one JSON line,
and exits 1 when it fails.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import linecache
import os
import random
import sys
import time
import tracemalloc
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import anyio

from benchmarks.fakes import configure_logging
from builtin_plugins.budget_guard import BudgetGuard, Totals
from builtin_plugins.ordering import OrderingChecker
from builtin_plugins.tracing import TracingPlugin
from hook_specs import Usage, hookimpl
from sampling_core import (
    Generation,
    GenerationRequest,
    PluginError,
    Requirement,
    RetryPolicy,
    Sampler,
    StopSampling,
    TransientBackendError,
)

__all__ = ["SoakReport", "main", "soak"]

DEFAULT_CALLS = 10_000
SMOKE_CALLS = 1_000
DEFAULT_MARGIN_BLOCKS = 1_000


class BackendDown(RuntimeError):
    """An ordinary backend failure."""


class Abandoned(BaseException):
    """A ``BaseException`` from the backend (as ``KeyboardInterrupt`` would be)."""


class FaultyBackend:
    """Answers at once, or after one checkpoint; fails now and then in every way."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.usage = Usage(3, 2)

    async def generate(self, request: GenerationRequest) -> Generation:
        roll = self.rng.random()
        if roll < 0.002:
            raise Abandoned("the backend gave up")
        if roll < 0.06:
            raise TransientBackendError("busy", retry_after=0.0, status=503)
        if roll < 0.10:
            raise BackendDown("down")
        if roll < 0.40:
            await anyio.sleep(0)  # let the other attempts and calls run
        return Generation("PASS" if self.rng.random() < 0.2 else "FAIL", usage=self.usage)


class FaultyPlugin:
    """Raises at random: isolated faults, faults that fail closed, ``StopSampling``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.ends = 0

    @hookimpl
    def generation_pre_call(self, payload: Any) -> None:
        if self.rng.random() < 0.002:
            raise ValueError("a mutating hook failed")  # fails closed: PluginError

    @hookimpl
    async def sampling_iteration(self, payload: Any) -> None:
        roll = self.rng.random()
        if roll < 0.01:
            raise StopSampling("enough")
        if roll < 0.05:
            raise ValueError("an observer failed")  # isolated
        if roll < 0.3:
            await anyio.sleep(0)

    @hookimpl
    async def sampling_repair(self, payload: Any) -> None:
        await anyio.sleep(0)

    @hookimpl
    def generation_error(self, payload: Any) -> None:
        if self.rng.random() < 0.05:
            raise ValueError("an observer failed")  # isolated

    @hookimpl
    def sampling_loop_end(self, payload: Any) -> None:
        self.ends += 1


class PerCallPlugin:
    """A plugin given to one call only."""

    @hookimpl
    def generation_post_call(self, payload: Any) -> None:
        """Do nothing."""


PASSES = Requirement("says PASS", lambda text: text == "PASS")


@dataclass
class SoakReport:
    """What a soak did and what it left behind."""

    calls: int
    seconds: float
    outcomes: dict[str, int]
    loop_ends: int
    blocks_before: int
    blocks_after: int
    rss_before: int
    rss_after: int
    tasks_left: int
    margin_blocks: int
    traced_growth: int | None = None
    top_growth: list[str] = field(default_factory=list)

    @property
    def growth(self) -> int:
        """Memory blocks still allocated after the soak that were not before it."""
        return self.blocks_after - self.blocks_before

    @property
    def growth_per_call(self) -> float:
        """:attr:`growth` per call."""
        return self.growth / self.calls

    @property
    def passed(self) -> bool:
        """Memory within the margin, no task left, and ``sampling_loop_end`` once per call."""
        return (
            self.growth <= self.margin_blocks
            and self.tasks_left == 0
            and self.loop_ends == self.calls
        )

    def render(self) -> str:
        """A few lines for people."""
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))
        lines = [
            f"soak: {self.calls:,} sample() calls in {self.seconds:.1f} s "
            f"({1e6 * self.seconds / self.calls:.0f} µs per call)",
            f"soak: outcomes: {outcomes}",
            f"soak: allocated blocks {self.blocks_before:,} -> {self.blocks_after:,}: "
            f"{self.growth:+,} ({self.growth_per_call:+.3f} per call; "
            f"margin {self.margin_blocks:,})",
            f"soak: RSS {self.rss_before / 2**20:.1f} MiB -> {self.rss_after / 2**20:.1f} MiB "
            f"({(self.rss_after - self.rss_before) / 1024:+,.0f} KiB); tasks left: "
            f"{self.tasks_left}; loop ends: {self.loop_ends:,}",
        ]
        if self.traced_growth is not None:
            lines.append(
                f"soak: tracemalloc: {self.traced_growth:+,} B kept "
                f"({self.traced_growth / self.calls:+.1f} B per call)"
            )
            lines += [f"soak:   kept at {site}" for site in self.top_growth]
        lines.append(f"soak: {'PASS' if self.passed else 'FAIL'}")
        return "\n".join(lines)

    def json_line(self) -> str:
        """The report as one JSON line."""
        data = asdict(self)
        data.update(growth=self.growth, growth_per_call=self.growth_per_call, passed=self.passed)
        return json.dumps({"soak": data})


def _rss() -> int:
    """The resident set size of this process, in bytes (0 where /proc is missing)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _warm_source_cache() -> None:
    """Read every loaded module's source into ``linecache`` now.

    Formatting a traceback (the OTel plugin records each exception's stack) reads the lines
    of every file in it into ``linecache``, once per file: a cache, not a leak. Whether a
    rare exception path first runs in the warm-up or in the measured calls is chance, so
    every file is read before the measurement instead.
    """
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and path.endswith(".py"):
            linecache.getlines(path)


def _settle() -> int:
    """Collect garbage until nothing more goes; return the memory blocks still allocated."""
    for _ in range(3):
        gc.collect()
    return sys.getallocatedblocks()


async def _one_call(
    sampler: Sampler, rng: random.Random, outcomes: Counter[str], per_call: PerCallPlugin
) -> None:
    cancel_after = rng.choice([0.0, 0.0005]) if rng.random() < 0.05 else None
    scope = anyio.move_on_after(cancel_after) if cancel_after is not None else None
    try:
        with scope or contextlib.nullcontext():
            result = await sampler.sample(
                "Say PASS.",
                requirements=[PASSES],
                loop_budget=rng.randint(1, 4),
                concurrency_budget=rng.randint(1, 4),
                selection=rng.choice(["first", "ordered"]),
                plugins=[per_call] if rng.random() < 0.1 else None,
            )
            outcomes[result.stop_reason] += 1
    except (BackendDown, TransientBackendError, PluginError, Abandoned) as exc:
        outcomes[type(exc).__name__] += 1
    if scope is not None and scope.cancelled_caught:
        outcomes["cancelled"] += 1


async def _calls(
    sampler: Sampler, rng: random.Random, count: int, parallel: int, outcomes: Counter[str]
) -> None:
    per_call = PerCallPlugin()
    done = 0
    while done < count:
        wave = min(parallel, count - done)
        async with anyio.create_task_group() as group:
            for _ in range(wave):
                group.start_soon(_one_call, sampler, rng, outcomes, per_call)
        done += wave


async def soak(
    calls: int = DEFAULT_CALLS,
    *,
    parallel: int = 8,
    seed: int = 7,
    margin_blocks: int = DEFAULT_MARGIN_BLOCKS,
    trace: bool = False,
) -> SoakReport:
    """Run the soak (under asyncio) and return its report."""
    rng = random.Random(seed)
    faulty = FaultyPlugin(rng)
    sampler = Sampler(
        FaultyBackend(rng),
        plugins=[
            faulty,
            TracingPlugin(),
            OrderingChecker(keep=16),
            BudgetGuard(max_generations_per_call=12, totals=Totals()),
        ],
        load_entrypoints=False,
        retry=RetryPolicy(max_retries=1, base_delay=0.0),
    )
    await _calls(sampler, rng, max(200, calls // 10), parallel, Counter())  # warm-up
    _warm_source_cache()
    if trace:
        tracemalloc.start()
    try:
        blocks_before, rss_before = _settle(), _rss()
        snapshot = tracemalloc.take_snapshot() if trace else None
        ends_before = faulty.ends
        outcomes: Counter[str] = Counter()
        started = time.perf_counter()
        await _calls(sampler, rng, calls, parallel, outcomes)
        seconds = time.perf_counter() - started
        blocks_after, rss_after = _settle(), _rss()
        report = SoakReport(
            calls=calls,
            seconds=seconds,
            outcomes=dict(outcomes),
            loop_ends=faulty.ends - ends_before,
            blocks_before=blocks_before,
            blocks_after=blocks_after,
            rss_before=rss_before,
            rss_after=rss_after,
            tasks_left=len([t for t in asyncio.all_tasks() if t is not asyncio.current_task()]),
            margin_blocks=margin_blocks,
        )
        if snapshot is not None:
            kept = tracemalloc.take_snapshot().compare_to(snapshot, "lineno")
            report.traced_growth = sum(stat.size_diff for stat in kept)
            report.top_growth = [
                f"{stat.traceback[0]}: {stat.size_diff:+,} B in {stat.count_diff:+,} blocks"
                for stat in kept[:5]
                if stat.size_diff > 0
            ]
    finally:
        if trace:
            tracemalloc.stop()
    return report


def main(argv: list[str] | None = None) -> int:
    """Run the soak from the command line; exit 0 when it passed."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.soak",
        description="Many sample() calls with random faults; memory must not grow.",
    )
    parser.add_argument("--calls", type=int, default=DEFAULT_CALLS, help="sample() calls")
    parser.add_argument("--parallel", type=int, default=8, help="calls in flight at once")
    parser.add_argument("--seed", type=int, default=7, help="seed of every random choice")
    parser.add_argument(
        "--margin-blocks",
        type=int,
        default=DEFAULT_MARGIN_BLOCKS,
        help="memory blocks the soak may leave allocated",
    )
    parser.add_argument(
        "--trace", action="store_true", help="also trace allocations (slow), naming lines"
    )
    args = parser.parse_args(argv)
    if args.calls < 1 or args.parallel < 1:
        parser.error("--calls and --parallel must be at least 1")
    configure_logging()
    report = asyncio.run(
        soak(
            args.calls,
            parallel=args.parallel,
            seed=args.seed,
            margin_blocks=args.margin_blocks,
            trace=args.trace,
        )
    )
    print(report.render())
    print(report.json_line())
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
