"""Early exit, a rescore whose checks fail the pass the run stopped at, then ``compare``: the
rescore judged that prompt on fewer attempts than a run with its checks would have made,
and the comparison says so beside its verdict (the rescore's report does already)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sampling_core import ScriptedBackend
from sampling_core.runs import rescore, run_batch
from sampling_core.runs.reports.compare import compare_runs
from tests.support.runs_helpers import write_config, write_dataset

pytestmark = pytest.mark.anyio


async def test_compare_says_when_a_rescore_judged_prompts_on_fewer_attempts(
    tmp_path: Path,
) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    budgets = {"loop_budget": 3, "concurrency_budget": 1}
    source = write_config(tmp_path / "a.yaml", dataset, budgets=budgets)
    await run_batch(source, tmp_path / "a", backend=ScriptedBackend(["a short answer"]))
    # every prompt passed at its first attempt, so the run stopped there; "zebra" fails it,
    # and the two attempts a run with that check would have gone on to make never ran
    await rescore(tmp_path / "a", tmp_path / "b", requirements=[{"contains": "zebra"}])
    compared = compare_runs(tmp_path / "a", tmp_path / "b")
    (note,) = [n for n in compared.notes if "fewer attempts" in n]
    assert note.startswith("B is a rescore that judged 2 prompts on fewer attempts")
    assert "(4 never ran" in note and note in compared.render()
    assert not [n for n in compare_runs(tmp_path / "a", tmp_path / "a").notes if "rescore" in n]
