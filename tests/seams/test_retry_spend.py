"""``--retry-failed`` with a vote that ends once settled: the retried prompt is asked again
(not replayed from the cache), and the run's spend counts every record's tokens (what its
first, failed record spent was paid too), while its outcome counts the latest record."""

from __future__ import annotations

from pathlib import Path

import pytest

from sampling_core import GenerationRequest, ScriptedBackend
from sampling_core.runs import run_batch
from sampling_core.runs.reports.report import build_report
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio


async def test_a_retried_prompts_first_spend_stays_in_the_runs_totals(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 3)
    config = write_config(
        tmp_path / "c.yaml",
        dataset,
        requirements=[{"matches": "^[0-9]+$"}],
        run={"cache": str(tmp_path / "c.sqlite")},
        strategy={"name": "majority", "consensus": 1.0},
        budgets={"concurrency_budget": 5, "launch": "on_failure"},
    )
    fixed = {"now": False}

    def reply(request: GenerationRequest) -> str:
        return "7" if fixed["now"] or "number 1" not in request.prompt else "nope"

    await run_batch(config, tmp_path / "run", backend=ScriptedBackend(reply))
    fixed["now"] = True
    again = ScriptedBackend(reply)
    await run_batch(config, tmp_path / "run", backend=again, resume=True, retry_failed=True)
    assert again.calls == 3  # asked again, not replayed: settled after three sevens
    spent = [
        (r["key"], r["status"], r["attempts"]["used"], r["usage"]["input_tokens"])
        for r in records(tmp_path / "run")
    ]
    # each request is 3 words in: p0 and p2 settle at 3 votes; p1 fails 5 times, then 3
    assert sorted(spent) == [
        ("p0", "ok", 3, 9),
        ("p1", "failed", 5, 15),
        ("p1", "ok", 3, 9),
        ("p2", "ok", 3, 9),
    ]
    totals = build_report(tmp_path / "run").as_dict()["totals"]
    assert (totals["ok"], totals["failed"], totals["retried_prompts"]) == (3, 0, 1)
    assert totals["input_tokens"] == 9 + 9 + 15 + 9
