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
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
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


def main() -> None:
    """Print the figures (see the module's docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
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
