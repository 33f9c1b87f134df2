"""``python -m benchmarks.cache``: the quickstart run twice with one response cache.

Runs ``examples/quickstart.yaml`` as shipped (24 prompts on the embedded SmolLM2-135M through
llama.cpp: its seed, budgets, early stop, launch policy and plugins) into two temporary run
directories with the same ``--cache`` file, on one llama.cpp server with as many slots as
``samplehooks run`` would give it. Tokens are the server's own counters (``/metrics``:
``tokens_predicted_total``, read once the server is idle, as :mod:`benchmarks.tokens` reads
them), so what a cached call did not generate is not counted by the engine's word for it.

Prints per run: the tokens the server generated, the prompts ok, the calls the cache
answered, the attempts stopped early, the wall time; then the second run's tokens as a share
of the first's, and one JSON line. The second run should decode at most 5% of the first's
tokens and get as many prompts ok. Takes a minute or two on 2 cores.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks.tokens import counters, spent
from sampling_core.backends.local import LlamaServer, LocalBackend
from sampling_core.runs import load_config, run_batch
from sampling_core.runs.config.config import RunConfig

CONFIG = Path(__file__).resolve().parent.parent / "examples" / "quickstart.yaml"


def shipped() -> RunConfig:
    """The quickstart as shipped (its progress bar off)."""
    config = load_config(CONFIG)
    return config.model_copy(update={"run": config.run.model_copy(update={"progress": "off"})})


def slots(config: RunConfig) -> int:
    """The llama.cpp slots ``samplehooks run`` gives the local backend of ``config``."""
    return config.run.max_concurrent_prompts * config.budgets.concurrency_budget


async def one_run(server: LlamaServer, config: RunConfig, out: Path, cache: Path) -> dict[str, Any]:
    """One run of ``config`` into ``out`` with ``cache``: server tokens and the summary's counts.

    Each run has a backend of its own, as two ``samplehooks run`` commands would (the cache
    knows the model by its file, not by the object or the server's port)."""
    assert server.base_url is not None
    before = await counters(server.base_url)
    started = time.perf_counter()
    async with LocalBackend(server=server) as backend:
        summary = await run_batch(config, out, backend=backend, cache=cache, log=lambda m: None)
    wall = time.perf_counter() - started
    used = spent(before, await counters(server.base_url))
    return {
        "generated": int(used["generated"]),
        "prompt": int(used["prompt"]),
        "ok": summary.ok,
        "done": summary.done,
        "attempts": sum(n * c for n, c in summary.attempts_histogram.items()),
        "cached_calls": summary.cached_calls,
        "stopped_early": summary.stopped_early,
        "wall_s": round(wall, 2),
    }


def share(first: dict[str, Any], second: dict[str, Any]) -> float:
    """The second run's generated tokens as a share of the first's."""
    return second["generated"] / first["generated"] if first["generated"] else 0.0


async def main() -> None:
    """Run the quickstart twice with one cache on one server; print both and the share."""
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    config = shipped()
    server = LlamaServer(parallel=slots(config))
    await anyio.to_thread.run_sync(server.start)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cache = Path(tmp) / "responses.sqlite"
            first = await one_run(server, config, Path(tmp) / "first", cache)
            print("first: ", json.dumps(first), flush=True)
            second = await one_run(server, config, Path(tmp) / "second", cache)
            print("second:", json.dumps(second), flush=True)
    finally:
        await anyio.to_thread.run_sync(server.stop)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    ratio = share(first, second)
    print(
        f"second run: {second['generated']} of {first['generated']} tokens generated again "
        f"({ratio:.1%}); prompts ok {first['ok']} then {second['ok']} of {first['done']}"
    )
    print(json.dumps({"first": first, "second": second, "share": round(ratio, 4)}))


if __name__ == "__main__":
    anyio.run(main)
