"""Reading a run takes memory bounded by what it shows, not by the run's size.

Each reader (resume with nothing left, the summary, ``report``, ``report --json``, the view,
``trace show``'s reading of the events)
reads a small run and a run six times larger; the peak of what Python allocated meanwhile
(``tracemalloc``) must not grow with the run. Held records would add about 3 KB each (4 MB
between the two runs), held report rows about 460 bytes each (700 KB). The view is measured
with its table bounded at 20 prompts, as it is at 10,000 for a real run.
"""

from __future__ import annotations

import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from sampling_core.events import iter_calls
from sampling_core.runs import compare_runs, run_batch_sync
from sampling_core.runs.reports.report import build_report, write_report_json
from sampling_core.view import data as view_data
from sampling_core.view import page_data
from tests.support.runs_helpers import write_config, write_dataset

SMALL, LARGE = 300, 1_800
GROWTH_ALLOWED = 400_000  # bytes: a few hundred bytes a record would exceed it


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[Path, Path]]:
    """A finished run of each size (two samples a prompt, so pass@k is measured)."""
    made = {}
    for size in (SMALL, LARGE):
        folder = tmp_path_factory.mktemp(f"run{size}")
        dataset = write_dataset(folder / "data.jsonl", size, zebra_every=3)
        config = write_config(
            folder / "run.yaml",
            dataset,
            backend={"kind": "scripted", "replies": ["a short answer", "not short enough at all"]},
            budgets={"loop_budget": 1, "concurrency_budget": 2, "early_exit": False},
            run={"progress": "off", "max_concurrent_prompts": 16},
            plugins=["recorder"],
        )
        run_batch_sync(config, folder / "out", log=lambda message: None)
        made[size] = (config, folder / "out")
    return made


def _peak(read: Callable[[], object]) -> int:
    read()  # once before: imports and caches are not the reader's
    tracemalloc.start()
    try:
        read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _json_to_nowhere(run: Path) -> None:
    with open(os.devnull, "w", encoding="utf-8") as out:
        write_report_json(run, out)


READERS: dict[str, Callable[[Path, Path], object]] = {
    "report (and the summary)": lambda config, run: build_report(run).render(),
    "report --json": lambda config, run: _json_to_nowhere(run),
    "view of two runs": lambda config, run: page_data([run, run]),
    "compare": lambda config, run: compare_runs(run, run).render(),
    "trace show's reading": lambda config, run: sum(1 for _ in iter_calls(run / "events.jsonl")),
    "resume, nothing left": lambda config, run: run_batch_sync(
        config, run, resume=True, log=lambda message: None
    ),
}


@pytest.mark.parametrize("reader", READERS)
def test_memory_does_not_grow_with_the_run(
    reader: str, runs: dict[int, tuple[Path, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(view_data, "MAX_ROWS", 20)
    monkeypatch.setattr(view_data, "MAX_TIMELINES", 5)
    read = READERS[reader]
    small, large = (_peak(lambda size=size: read(*runs[size])) for size in (SMALL, LARGE))
    assert large - small < GROWTH_ALLOWED, (reader, small, large)


def test_the_view_lists_a_bounded_table_and_says_what_it_left_out(
    runs: dict[int, tuple[Path, Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(view_data, "MAX_ROWS", 20)
    monkeypatch.setattr(view_data, "MAX_TIMELINES", 5)
    _, run = runs[LARGE]
    data = page_data([run])
    (shown,) = data["runs"]
    prompts = shown["prompts"]
    assert len(prompts) == 20 and sum("lanes" in p for p in prompts) == 5
    statuses = [p["status"] for p in prompts]
    assert statuses == sorted(statuses, key=lambda s: s == "ok")  # not ok first
    assert any(f"lists 20 of {LARGE:,} prompts" in note for note in shown["notes"])
    assert any("timelines are embedded for the first 5" in note for note in shown["notes"])
    # the charts count every prompt, not only those listed
    for name in ("elapsed_s", "tokens"):
        assert sum(data["charts"][name]["counts"][0]) == LARGE, name
    assert shown["totals"]["done"] == LARGE
    assert sum(count for _, count in shown["ok_by_attempts"]) == shown["totals"]["ok"]
