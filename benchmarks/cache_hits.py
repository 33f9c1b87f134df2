"""What a response-cache hit costs: ``python -m benchmarks.cache_hits``.

One ``sample()`` call (``loop_budget=1``, ``concurrency_budget=1``, a seed) answered from a
warm response cache, against the same call made of a zero-latency ``ScriptedBackend`` with no
cache, timed in this process in alternation (:func:`benchmarks.timing.time_batches`):

- ``whole``: no requirement, so the call is not streamed;
- ``streamed``: a ``max_words`` requirement (a prefix check), so the call streams and a hit
  arrives through the stream reader (a cut answer would be judged there).

Prints, per case, the microseconds per call of each side, wall time and CPU time (of every
thread of the process: a hit reads SQLite in a worker thread), and the ratios hit / no cache,
then one JSON line. A hit costs more than a backend that answers at once; the ratios are what
the cache's own path adds, to compare between versions. On a loaded machine the wall time
mostly measures how long the worker thread waits for a core: compare the CPU figures.

``--instructions`` counts instead, under valgrind's callgrind (as ``benchmarks.instructions``
does): the instructions per hit of each case, the difference of two runs of 100 and 300
hits, with the SQLite read made in the event loop's thread so that handing it to a worker
thread and back does not count. It does not move with the machine's load.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from benchmarks.timing import alternating, median
from sampling_core import Sampler, ScriptedBackend
from sampling_core.requirements import max_words

CASES: dict[str, dict[str, Any]] = {
    "whole": {},
    "streamed": {"requirements": [max_words(40)]},
}
"""The calls measured: keyword arguments of ``sample()`` besides the prompt and seed."""


async def measure(calls: int, repeats: int) -> dict[str, dict[str, float]]:
    """Microseconds per call, with a warm cache and without one, and their ratio, per case."""
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "responses.sqlite"
        backend = ScriptedBackend(["a short answer of five words"])
        cached = Sampler(backend, cache=path, load_entrypoints=False)
        plain = Sampler(backend, load_entrypoints=False)
        try:
            for name, ask in CASES.items():
                await cached.sample("q", seed=1, **ask)  # the one miss: the cache is warm

                async def hit(ask: dict[str, Any] = ask) -> None:
                    result = await cached.sample("q", seed=1, **ask)
                    assert result.cached_calls == 1

                async def no_cache(ask: dict[str, Any] = ask) -> None:
                    await plain.sample("q", seed=1, **ask)

                wall, cpu = await timed({"hit": hit, "no cache": no_cache}, calls, repeats)
                out[name] = {
                    "hit_us": median(wall["hit"]) / calls * 1e6,
                    "no_cache_us": median(wall["no cache"]) / calls * 1e6,
                    "ratio": _ratio(wall),
                    "hit_cpu_us": median(cpu["hit"]) / calls * 1e6,
                    "no_cache_cpu_us": median(cpu["no cache"]) / calls * 1e6,
                    "cpu_ratio": _ratio(cpu),
                }
        finally:
            await cached.aclose()
            await plain.aclose()
    return out


async def timed(
    runners: dict[str, Callable[[], Awaitable[None]]], calls: int, repeats: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of ``calls`` sequential calls of each runner, ``repeats`` times,
    in alternating order (after a warm-up of 50 calls each)."""
    for run in runners.values():
        for _ in range(50):
            await run()
    wall: dict[str, list[float]] = {name: [] for name in runners}
    cpu: dict[str, list[float]] = {name: [] for name in runners}
    for repetition in range(repeats):
        for name, run in alternating(runners, repetition):
            gc.collect()
            began, began_cpu = time.perf_counter(), time.process_time()
            for _ in range(calls):
                await run()
            cpu[name].append(time.process_time() - began_cpu)
            wall[name].append(time.perf_counter() - began)
    return wall, cpu


def _ratio(seconds: dict[str, list[float]]) -> float:
    """The median of the repetitions' ratios hit / no cache (each pair timed back to back)."""
    return median([h / n for h, n in zip(seconds["hit"], seconds["no cache"], strict=True)])


def hits_in_loop_thread(case: str, calls: int) -> None:
    """Make ``calls`` hits of ``case`` (after a warm-up), the cache read in this thread."""
    from sampling_core.backends.cache_store import ResponseCache

    async def read_here(self: ResponseCache, key: str, identity: str, in_force: Any = ()) -> Any:
        return self.get(key, identity, frozenset(in_force))

    ResponseCache.aget = read_here  # type: ignore[method-assign]

    async def run() -> None:
        with tempfile.TemporaryDirectory() as folder:
            backend = ScriptedBackend(["a short answer of five words"])
            cached = Sampler(backend, cache=Path(folder) / "r.sqlite", load_entrypoints=False)
            try:
                for _ in range(50):
                    await cached.sample("q", seed=1, **CASES[case])
                gc.collect()
                gc.freeze()
                for _ in range(calls):
                    result = await cached.sample("q", seed=1, **CASES[case])
                assert result.cached_calls == 1
            finally:
                await cached.aclose()

    asyncio.run(run())


def instructions_per_hit(case: str) -> float:
    """Instructions per hit of ``case`` (see the module's docstring)."""
    from benchmarks.instructions import collected

    def count(calls: int) -> int:
        command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
        command += [sys.executable, "-m", "benchmarks.cache_hits", "--child", case, str(calls)]
        if shutil.which("setarch"):
            command = ["setarch", platform.machine(), "-R", *command]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
        return collected(done.stderr)

    return (count(300) - count(100)) / 200


def main() -> None:
    """Print the figures (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--instructions", action="store_true", help="count, under callgrind")
    parser.add_argument("--child", nargs=2, metavar=("CASE", "CALLS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        hits_in_loop_thread(args.child[0], int(args.child[1]))
        return
    if args.instructions:
        if shutil.which("valgrind") is None:
            raise SystemExit("valgrind is needed: apt install valgrind")
        counts = {case: instructions_per_hit(case) for case in CASES}
        for case, per_hit in counts.items():
            print(f"{case:>9}: {per_hit / 1000:.1f} k instructions per hit")
        print(json.dumps({"cache_hit_instructions": counts}))
        return
    figures = asyncio.run(measure(args.calls, args.repeats))
    for name, row in figures.items():
        print(
            f"{name:>9}: wall: hit {row['hit_us']:7.1f} µs/call, no cache "
            f"{row['no_cache_us']:6.1f} µs/call, ratio {row['ratio']:.2f}; CPU: hit "
            f"{row['hit_cpu_us']:7.1f} µs/call, no cache {row['no_cache_cpu_us']:6.1f} µs/call, "
            f"ratio {row['cpu_ratio']:.2f}"
        )
    print(json.dumps({"cache_hits": figures}))


if __name__ == "__main__":
    main()
