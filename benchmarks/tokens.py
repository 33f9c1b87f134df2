"""``python -m benchmarks.tokens``: tokens, wall time and success with and without early
stop, launch policies and constrained output, on the local model.

The quickstart (``examples/quickstart.yaml``: its 24 prompts and requirements, seed and
``max_tokens: 48``) is run at ``loop_budget`` 3 x ``concurrency_budget`` 4 with 8 prompts at
once, as ``samplehooks run`` would, once per variant:

* ``today``: every subsample at once, no early stop (what samplehooks did before);
* ``early stop``: a generation stops at its first failing prefix check;
* ``staggered`` / ``on_failure``: the launch policies alone;
* ``early stop + staggered`` / ``early stop + on_failure``: both.

Tokens are the llama.cpp server's own counters (``/metrics``: ``tokens_predicted_total``
for generated tokens, so work cancelled in flight counts), read once the server is idle.
Variants run in turn, and with ``--rounds N`` the rounds alternate their order, so that the
machine's load drifts over all of them alike. Then the three JSON prompts run with and
without ``format`` (a JSON schema per prompt, so the server constrains its decoding).

Prints one table per part and a JSON line. Takes minutes on 2 cores: run it when the
machine is otherwise quiet (the load average is printed before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from sampling_core import Sampler
from sampling_core.backends.local import LlamaServer, LocalBackend
from sampling_core.kinds import default_kinds
from sampling_core.runs import load_config, run_batch
from sampling_core.runs.config.components import build_requirements, prompt_seed
from sampling_core.runs.config.config import RunConfig
from sampling_core.runs.config.dataset import read_dataset

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "examples" / "quickstart.yaml"
LOOP_BUDGET, CONCURRENCY_BUDGET, MAX_TOKENS, IN_FLIGHT = 3, 4, 48, 8

VARIANTS: dict[str, dict[str, Any]] = {
    "today": {"early_stop": False, "launch": "all"},
    "early stop": {"early_stop": True, "launch": "all"},
    "staggered": {"early_stop": False, "launch": "staggered"},
    "on_failure": {"early_stop": False, "launch": "on_failure"},
    "early stop + staggered": {"early_stop": True, "launch": "staggered"},
    "early stop + on_failure": {"early_stop": True, "launch": "on_failure"},
}

SCHEMAS: dict[str, dict[str, Any]] = {
    "json-name": {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
    "json-city": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
    "json-list": {
        "type": "array",
        "items": {"type": "number"},
        "minItems": 3,
        "maxItems": 3,
    },
}
"""The JSON prompts' answers as schemas (what their requirements ask for)."""


def quickstart(stagger_s: float, **budgets: Any) -> RunConfig:
    """The quickstart's config at the benchmark's budgets, without plugins, with ``budgets``."""
    config = load_config(CONFIG)
    return config.model_copy(
        update={
            "budgets": config.budgets.model_copy(
                update={
                    "loop_budget": LOOP_BUDGET,
                    "concurrency_budget": CONCURRENCY_BUDGET,
                    "stagger_s": stagger_s,
                    **budgets,
                }
            ),
            "options": config.options.model_copy(update={"max_tokens": MAX_TOKENS}),
            "plugins": [],
            "run": config.run.model_copy(
                update={"max_concurrent_prompts": IN_FLIGHT, "progress": "off"}
            ),
        }
    )


async def counters(base_url: str) -> dict[str, float]:
    """The server's counters once it is idle (no request in flight, nothing deferred)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
        while True:
            values: dict[str, float] = {}
            for line in (await client.get("/metrics")).text.splitlines():
                if line.startswith("llamacpp:"):
                    name, _, value = line.partition(" ")
                    values[name.removeprefix("llamacpp:")] = float(value)
            if not values.get("requests_processing") and not values.get("requests_deferred"):
                return values
            await anyio.sleep(0.2)


def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Tokens the server generated and read between two readings."""
    return {
        "generated": after["tokens_predicted_total"] - before["tokens_predicted_total"],
        "prompt": (after["prompt_tokens_total"] + after["prompt_tokens_cached_total"])
        - (before["prompt_tokens_total"] + before["prompt_tokens_cached_total"]),
    }


async def run_variant(
    server: LlamaServer, backend: LocalBackend, name: str, stagger_s: float
) -> dict[str, Any]:
    """One quickstart run of variant ``name``: server tokens, wall time, ok prompts."""
    config = quickstart(stagger_s, **VARIANTS[name])
    assert server.base_url is not None
    before = await counters(server.base_url)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        summary = await run_batch(config, Path(tmp) / "run", backend=backend, log=lambda m: None)
        wall = time.perf_counter() - started
    used = spent(before, await counters(server.base_url))
    return {
        "variant": name,
        "generated": int(used["generated"]),
        "prompt": int(used["prompt"]),
        "wall_s": round(wall, 2),
        "ok": summary.ok,
        "done": summary.done,
        "stopped_early": summary.stopped_early,
        "not_started": summary.not_started,
    }


async def run_json(server: LlamaServer, backend: LocalBackend, constrained: bool) -> dict[str, Any]:
    """The three JSON prompts (budgets as the quickstart's today), with or without format."""
    config = load_config(CONFIG)
    kinds = default_kinds()
    rows = [item for item in read_dataset(config.dataset) if item.key in SCHEMAS]
    common = build_requirements(config.requirements, kinds)
    sampler = Sampler(backend, load_entrypoints=False)
    assert server.base_url is not None
    before = await counters(server.base_url)
    ok = attempts = 0
    started = time.perf_counter()
    for row in rows:
        own = build_requirements(row.requirements, kinds)
        result = await sampler.sample(
            row.prompt,
            requirements=[*common, *own],
            loop_budget=LOOP_BUDGET,
            concurrency_budget=CONCURRENCY_BUDGET,
            seed=prompt_seed(config.seed, row.key),
            options={**config.options.as_options(), "max_tokens": MAX_TOKENS},
            format=SCHEMAS[row.key] if constrained else None,
            early_stop=False,
        )
        ok += result.success
        attempts += result.iterations_used
    wall = time.perf_counter() - started
    used = spent(before, await counters(server.base_url))
    return {
        "variant": "format (constrained)" if constrained else "no format",
        "generated": int(used["generated"]),
        "wall_s": round(wall, 2),
        "ok": ok,
        "done": len(rows),
        "attempts": attempts,
    }


def mean_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per variant, the mean over rounds (ok and counts rounded)."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_name.setdefault(row["variant"], []).append(row)
    out = []
    for name, runs in by_name.items():
        mean = {"variant": name, "rounds": len(runs)}
        for key, value in runs[0].items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                total = sum(r[key] for r in runs) / len(runs)
                mean[key] = round(total, 2) if isinstance(value, float) else round(total, 1)
        out.append(mean)
    return out


def table(rows: list[dict[str, Any]], baseline: str) -> str:
    """A Markdown table: tokens, wall time and ok prompts, with ratios to ``baseline``."""
    base = next(r for r in rows if r["variant"] == baseline)
    lines = [
        "| variant | generated tokens | vs today | wall s | vs today | ok prompts |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['variant']} | {r['generated']:.0f} | {r['generated'] / base['generated']:.2f} "
            f"| {r['wall_s']:.1f} | {r['wall_s'] / base['wall_s']:.2f} | "
            f"{r['ok']:.1f} of {r['done']:.0f} |"
        )
    return "\n".join(lines)


async def main(argv: list[str] | None = None) -> None:
    """Run every variant (``--rounds`` times, alternating) and the JSON pair; print tables."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tokens")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each variant")
    parser.add_argument("--stagger-s", type=float, default=1.0, help="launch: staggered")
    parser.add_argument(
        "--only", help=f"comma-separated variants, among: {', '.join(VARIANTS)}; and json"
    )
    args = parser.parse_args(argv)
    names = list(VARIANTS) if not args.only else [n.strip() for n in args.only.split(",")]
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    server = LlamaServer(parallel=IN_FLIGHT * CONCURRENCY_BUDGET)
    await anyio.to_thread.run_sync(server.start)
    rows: list[dict[str, Any]] = []
    json_rows: list[dict[str, Any]] = []
    try:
        async with LocalBackend(server=server) as backend:
            for round_ in range(args.rounds):
                order = names if round_ % 2 == 0 else names[::-1]
                for name in order:
                    if name == "json":
                        for constrained in (False, True) if round_ % 2 == 0 else (True, False):
                            json_rows.append(await run_json(server, backend, constrained))
                            print(json.dumps(json_rows[-1]), flush=True)
                        continue
                    rows.append(await run_variant(server, backend, name, args.stagger_s))
                    print(json.dumps(rows[-1]), flush=True)
    finally:
        await anyio.to_thread.run_sync(server.stop)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    means = mean_rows(rows)
    if any(r["variant"] == "today" for r in means):
        print(table(means, "today"))
    json_means = mean_rows(json_rows)
    if json_means:
        print(table(json_means, "no format").replace("vs today", "vs no format"))
    print(json.dumps({"tokens": means, "json": json_means, "stagger_s": args.stagger_s}))


if __name__ == "__main__":
    anyio.run(main)
