"""Run directories for the ``samplehooks view`` tests, made with the scripted backend."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sampling_core.runs import run_batch_sync
from tests.support.runs_helpers import write_config, write_dataset

MIXED = ["a short answer", "an answer that is much too long for the check"]


def make_run(tmp_path: Path, name: str, count: int = 8, **overrides: Any) -> Path:
    """A finished scripted run ``tmp_path/name`` over ``count`` prompts (every 4th needs zebra)."""
    dataset = write_dataset(tmp_path / f"{name}.jsonl", count, zebra_every=4)
    settings: dict[str, Any] = {
        "backend": {"kind": "scripted", "replies": MIXED},
        "budgets": {"loop_budget": 1, "concurrency_budget": 4, "early_exit": False},
        "plugins": ["recorder"],
    }
    settings.update(overrides)
    config = write_config(tmp_path / f"{name}.yaml", dataset, **settings)
    out = tmp_path / name
    # In a thread of its own: the browser tests' Playwright keeps an event loop running in
    # this one, and a run starts its own.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(run_batch_sync, config, out).result()
    return out
