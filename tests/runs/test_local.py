"""The main job's config on the embedded local model (a few of its prompts, to stay quick)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sampling_core.runs import load_config, run_batch_sync
from tests.support.runs_helpers import records

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"


@pytest.mark.slow
def test_the_example_config_runs_on_the_local_model_and_resumes(tmp_path: Path) -> None:
    config = load_config(EXAMPLE)
    assert config.backend.kind == "local"
    lines = config.dataset.path.read_text(encoding="utf-8").splitlines()
    keys = ["capital-france", "sum-2-2", "short-sea", "json-name"]
    subset = tmp_path / "subset.jsonl"
    subset.write_text(
        "\n".join(line for line in lines if json.loads(line)["id"] in keys) + "\n",
        encoding="utf-8",
    )
    config = config.model_copy(
        update={
            "dataset": config.dataset.model_copy(update={"path": subset}),
            "options": config.options.model_copy(update={"max_tokens": 24}),
        }
    )
    out = tmp_path / "run"
    summary = run_batch_sync(config, out)
    assert summary.complete and summary.total == 4
    recs = records(out)
    assert sorted(r["key"] for r in recs) == sorted(keys)
    for record in recs:
        assert record["status"] in ("ok", "failed")  # the model answered every prompt
        assert record["text"] and record["usage"]["output_tokens"] > 0
        assert record["usage"]["cost_usd"] == 0.0 and record["sampling_id"]
        budget = config.budgets.loop_budget * config.budgets.concurrency_budget
        assert 1 <= record["attempts"]["used"] <= budget
        assert record["attempts"]["not_started"] + record["attempts"]["cancelled"] <= 3
    # the recorder plugin of the example wrote the hook events into the run directory
    events = [json.loads(line) for line in (out / "events.jsonl").open()]
    assert sum(e["hook"] == "sampling_loop_end" for e in events) == 4
    # nothing left to do: a resume with another concurrency limit starts no model call
    faster = config.model_copy(
        update={"run": config.run.model_copy(update={"max_concurrent_prompts": 1})}
    )
    again = run_batch_sync(faster, out, resume=True)
    assert again.done == 4 and len(records(out)) == 4
    change = f"run.max_concurrent_prompts: {config.run.max_concurrent_prompts} -> 1"
    assert change in (out / "effective_config.yaml").read_text()
