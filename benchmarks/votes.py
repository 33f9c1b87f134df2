"""``python -m benchmarks.votes``: fewer samples for the same vote, on the local model.

Majority voting (self-consistency) over ``examples/data/vote.jsonl`` (120 small arithmetic
questions, made by ``examples/data/make_vote.py``) at ``concurrency_budget`` 8, temperature
0.8 and the same seed per prompt for every variant, ``--in-flight`` prompts at once against
one llama.cpp server with 8 slots:

* ``majority``: the whole budget (what every peer does);
* ``consensus``: ``MajorityVote(consensus=...)`` ends a prompt once its pick is settled,
  its subsamples launched ``on_failure`` (the next one starts when one ends, while the
  vote is open), so that a settled vote leaves the rest unstarted;
* ``confidence``: ``min_confidence`` (calibrated per prompt: by default the threshold is
  the lowest group confidence, over windows of 4 tokens, of the prompt's first whole
  answer) stops answers less sure than that;
* ``consensus + confidence``: both.

Answers are compared by their last number. The vote sees one requirement, a format check
(the answer holds a number); accuracy is the picked answer against the dataset's answer,
outside the vote. Tokens are the server's own counters (``/metrics``, cancelled work
included). Beside each variant's accuracy difference with ``majority``: a 95% paired
bootstrap interval over prompts.

Takes a long time on 2 cores (about 10 minutes a variant for all 120 prompts): ``--limit N``
runs the first N prompts.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks.tokens import counters, spent
from sampling_core import Sampler
from sampling_core.backends.local import LlamaServer, LocalBackend
from sampling_core.requirements.checks import Requirement, matches
from sampling_core.requirements.confidence import min_confidence
from sampling_core.runs.config.components import prompt_seed
from sampling_core.strategies import MajorityVote, last_number

ROOT = Path(__file__).resolve().parent.parent
DATASET = ROOT / "examples" / "data" / "vote.jsonl"
CONCURRENCY_BUDGET, SLOTS, SEED = 8, 8, 34
OPTIONS = {"temperature": 0.8, "max_tokens": 24}

VARIANTS: dict[str, dict[str, bool]] = {
    "majority": {"consensus": False, "confidence": False},
    "consensus": {"consensus": True, "confidence": False},
    "confidence": {"consensus": False, "confidence": True},
    "consensus + confidence": {"consensus": True, "confidence": True},
}


def rows(limit: int | None = None) -> list[dict[str, str]]:
    """The dataset's lines (the first ``limit``)."""
    lines = [json.loads(line) for line in DATASET.read_text().splitlines() if line.strip()]
    return lines[:limit] if limit else lines


def settings(
    name: str, consensus: float, window: int, warmup: int, keep: float, launch: str
) -> tuple[MajorityVote, list[Requirement], str]:
    """The strategy, requirements and launch policy of variant ``name``."""
    chosen = VARIANTS[name]
    strategy = MajorityVote("last_number", consensus=consensus if chosen["consensus"] else None)
    requirements = [matches(r"\d", description="holds a number")]
    if chosen["confidence"]:
        requirements.append(min_confidence(window=window, warmup=warmup, keep=keep))
    return strategy, requirements, launch if chosen["consensus"] else "all"


def correct(text: str | None, answer: str) -> bool:
    """Whether the picked answer's last number is the dataset's answer."""
    return text is not None and last_number(text) == answer


def paired_bootstrap(
    base: list[bool], other: list[bool], resamples: int = 4000, seed: int = 0
) -> tuple[float, float, float]:
    """The accuracy difference ``other - base`` (points) and its 95% paired bootstrap
    interval over prompts."""
    n = len(base)
    diffs = [int(o) - int(b) for b, o in zip(base, other, strict=True)]
    rng = random.Random(seed)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    low, high = means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]
    return 100 * sum(diffs) / n, 100 * low, 100 * high


async def run_variant(
    server: LlamaServer,
    backend: LocalBackend,
    name: str,
    lines: list[dict[str, str]],
    in_flight: int,
    knobs: dict[str, Any],
) -> dict[str, Any]:
    """Every prompt under variant ``name``: tokens, wall time, the picks' correctness."""
    sampler = Sampler(backend, load_entrypoints=False)
    assert server.base_url is not None
    before = await counters(server.base_url)
    right: list[bool] = [False] * len(lines)
    calls = not_started = cancelled = stopped = 0
    limiter = anyio.CapacityLimiter(in_flight)

    async def one(index: int, line: dict[str, str]) -> None:
        nonlocal calls, not_started, cancelled, stopped
        strategy, requirements, launch = settings(name, **knobs)
        async with limiter:
            result = await sampler.sample(
                line["prompt"],
                requirements=requirements,
                strategy=strategy,
                concurrency_budget=CONCURRENCY_BUDGET,
                seed=prompt_seed(SEED, line["id"]),
                options=dict(OPTIONS),
                launch=launch,
            )
        right[index] = correct(result.text, line["answer"])
        calls += result.iterations_used + result.cancelled
        not_started += result.not_started
        cancelled += result.cancelled
        stopped += sum(a.stopped_early for a in result.attempts)

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for index, line in enumerate(lines):
            group.start_soon(one, index, line)
    wall = time.perf_counter() - started
    used = spent(before, await counters(server.base_url))
    return {
        "variant": name,
        "generated": int(used["generated"]),
        "wall_s": round(wall, 1),
        "right": right,
        "accuracy": round(100 * sum(right) / len(right), 1),
        "calls": calls,
        "not_started": not_started,
        "cancelled": cancelled,
        "stopped_early": stopped,
    }


def table(results: list[dict[str, Any]]) -> str:
    """A Markdown table against ``majority``: tokens, wall time, accuracy and its interval."""
    base = next(r for r in results if r["variant"] == "majority")
    lines = [
        "| variant | generated tokens | vs majority | wall s | vs majority | majority-answer "
        "accuracy | difference (95% paired bootstrap) | not started | cancelled | stopped early |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        diff, low, high = paired_bootstrap(base["right"], r["right"])
        lines.append(
            f"| {r['variant']} | {r['generated']} | {r['generated'] / base['generated']:.2f} "
            f"| {r['wall_s']:.1f} | {r['wall_s'] / base['wall_s']:.2f} | {r['accuracy']:.1f}% "
            f"| {diff:+.1f} [{low:+.1f}, {high:+.1f}] | {r['not_started']} | {r['cancelled']} "
            f"| {r['stopped_early']} |"
        )
    return "\n".join(lines)


async def main(argv: list[str] | None = None) -> None:
    """Run the variants in turn on one server; print a JSON line each, then the table."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.votes")
    parser.add_argument("--limit", type=int, help="the first N prompts only")
    parser.add_argument("--in-flight", type=int, default=8, help="prompts at once")
    parser.add_argument(
        "--launch", default="on_failure", help="the consensus variants' launch policy"
    )
    parser.add_argument("--consensus", type=float, default=0.9)
    parser.add_argument("--window", type=int, default=4, help="min_confidence's window")
    parser.add_argument("--warmup", type=int, default=1, help="min_confidence's warm-up")
    parser.add_argument("--keep", type=float, default=0.9, help="min_confidence's keep")
    parser.add_argument("--only", help=f"comma-separated, among: {', '.join(VARIANTS)}")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.only.split(",")] if args.only else list(VARIANTS)
    if "majority" not in names:
        names.insert(0, "majority")
    knobs = {
        "consensus": args.consensus,
        "window": args.window,
        "warmup": args.warmup,
        "keep": args.keep,
        "launch": args.launch,
    }
    lines = rows(args.limit)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    print(json.dumps({"prompts": len(lines), "in_flight": args.in_flight, **knobs}), flush=True)
    server = LlamaServer(parallel=SLOTS, context_per_slot=256)
    await anyio.to_thread.run_sync(server.start)
    results = []
    try:
        async with LocalBackend(server=server) as backend:
            for name in names:
                result = await run_variant(server, backend, name, lines, args.in_flight, knobs)
                results.append(result)
                shown = {k: v for k, v in result.items() if k != "right"}
                print(json.dumps(shown), flush=True)
    finally:
        await anyio.to_thread.run_sync(server.stop)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(table(results))


if __name__ == "__main__":
    anyio.run(main)
