"""Profile the engine alone: ``python -m benchmarks.profile [--concurrency C] [--plugin P]``.

Runs many zero-latency ``sample()`` calls (``loop_budget=4``, never passing) under
pyinstrument (the ``bench`` extra) and prints where the engine's time goes. With
``--latency`` the backend sleeps, e.g. ``--latency 0.02 --concurrency 512 --loop-budget 1``
profiles the concurrency-scaling scenario.
"""

from __future__ import annotations

import argparse
import asyncio

from benchmarks.fakes import (
    FakeModel,
    TrivialPlugin,
    configure_logging,
    engine_runner,
    tracing_plugin,
)


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments, profile, print the report."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.profile")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--loop-budget", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--plugin", choices=("none", "trivial", "tracing"), default="none")
    parser.add_argument("--interval", type=float, default=0.0001, help="sampling interval (s)")
    args = parser.parse_args(argv)
    try:
        from pyinstrument import Profiler
    except ImportError as exc:
        raise SystemExit("pyinstrument is needed: pip install 'samplehooks[bench]'") from exc
    configure_logging()
    plugins = {"none": [], "trivial": [TrivialPlugin()], "tracing": [tracing_plugin()]}
    run = engine_runner(
        FakeModel(latency=args.latency),
        loop_budget=args.loop_budget,
        concurrency_budget=args.concurrency,
        plugins=plugins[args.plugin],
    )

    async def many() -> None:
        for _ in range(args.calls):
            await run()

    asyncio.run(many())  # warm up
    profiler = Profiler(interval=args.interval, async_mode="disabled")
    with profiler:
        asyncio.run(many())
    print(profiler.output_text(unicode=True, color=False, show_all=False))


if __name__ == "__main__":
    main()
