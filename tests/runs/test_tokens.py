"""Spending fewer tokens in a batch run: the YAML settings reach the engine, and records,
the report and the view show attempts stopped early, subsamples never started, and what
cancelled attempts spent (unknown as null, never 0)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from sampling_core import GenerationRequest, ScriptedBackend
from sampling_core.runs import run_batch
from sampling_core.runs.reports.report import build_report
from sampling_core.view.data import run_data
from tests.support.reliability_helpers import invoke
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio

RAMBLE = " ".join(["blah"] * 30)


async def test_a_run_records_early_stops_and_subsamples_never_started(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "data.jsonl", 2)
    config = write_config(
        tmp_path / "c.yaml",
        data,
        backend={"kind": "scripted", "replies": [RAMBLE, "a short answer"]},
        requirements=[{"max_words": 5}],
        budgets={
            "loop_budget": 2,
            "concurrency_budget": 3,
            "launch": "staggered",
            "stagger_s": 3600,  # decided long before: the later subsamples never start
        },
        plugins=["recorder"],
        run={"max_concurrent_prompts": 1},
    )
    await run_batch(config, tmp_path / "out")
    for record in records(tmp_path / "out"):
        assert record["status"] == "ok"
        attempts = record["attempts"]
        assert attempts["not_started"] == 2 and attempts["cancelled"] == 0
        assert attempts["stopped_early"] == 1
        stopped, passed = attempts["each"]
        assert stopped["stopped_early"] is True and stopped["text"] == " ".join(["blah"] * 6)
        assert stopped["output_tokens"] == 6  # what arrived before it was stopped
        assert "stopped_early" not in passed
        assert record["usage"]["cancelled"] == {"input_tokens": 0, "output_tokens": 0}
    report = build_report(tmp_path / "out", rows=True)
    totals = report.as_dict()["totals"]
    assert (totals["stopped_early"], totals["not_started"]) == (2, 4)
    assert "Saved: 2 attempt(s) stopped early, 4 subsample(s) never started" in report.render()
    assert [(r.stopped_early, r.not_started) for r in report.rows] == [(1, 2), (1, 2)]
    view = run_data(tmp_path / "out")
    (lane,) = view["prompts"][0]["lanes"]
    assert [(s["outcome"], s["stopped_early"]) for s in lane["steps"]] == [
        ("failed", True),
        ("passed", False),
    ]
    events = tmp_path / "out" / "events.jsonl"
    shown = invoke("trace", "show", events)
    assert shown.exit_code == 0 and "not_started=2" in shown.stdout
    calls = json.loads(invoke("trace", "show", events, "--json").stdout)
    for call in calls:
        early = [(a["stopped_early"], a["chunks"]) for a in call["attempts"]]
        assert early == [(True, 6), (False, 3)]


async def test_unknown_spend_is_null_in_records_and_at_least_in_the_report(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "data.jsonl", 1)
    config = write_config(
        tmp_path / "c.yaml",
        data,
        requirements=[{"contains": "answer"}],  # no prefix check: nothing streams
        budgets={"concurrency_budget": 2},
    )
    sibling = anyio.Event()

    async def reply(request: GenerationRequest) -> str:
        assert request.iteration is not None
        if request.iteration.subsample_index == 1:
            sibling.set()
            await anyio.sleep_forever()  # cancelled in flight, not streamed
        await sibling.wait()
        return "the answer"

    await run_batch(config, tmp_path / "out", backend=ScriptedBackend(reply))
    (record,) = records(tmp_path / "out")
    assert record["attempts"]["cancelled"] == 1
    assert record["usage"]["input_tokens"] is None and record["usage"]["output_tokens"] is None
    assert record["usage"]["cancelled"] == {"input_tokens": None, "output_tokens": None}
    assert record["attempts"]["each"][0]["output_tokens"] == 2  # the completed one, known
    report = build_report(tmp_path / "out", rows=True)
    # the prompt's tokens are not all known: left out of the sums, which are lower bounds
    assert report.summary.usage_unknown == 1 and report.summary.output_tokens == 0
    assert "Tokens: at least 0 in, 0 out" in report.render()
    (row,) = report.rows
    assert row.input_tokens is None and row.output_tokens is None
    shown = json.loads(invoke("report", tmp_path / "out", "--json").stdout)
    assert shown["totals"]["usage_unknown_prompts"] == 1
    assert shown["prompts"][0]["output_tokens"] is None


async def test_format_in_yaml_checks_and_is_sent_to_the_backend(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "data.jsonl", 1)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    config = write_config(
        tmp_path / "c.yaml", data, requirements=[], format=schema, budgets={"loop_budget": 2}
    )
    backend = ScriptedBackend(['{"n": "three"}', '{"n": 3}'])
    await run_batch(config, tmp_path / "out", backend=backend)
    (record,) = records(tmp_path / "out")
    assert record["status"] == "ok" and record["text"] == '{"n": 3}'
    first = record["attempts"]["each"][0]
    assert first["unmet"] == ["is JSON matching the schema"]
    assert [r.json_schema for r in backend.requests] == [schema, schema]


def test_a_format_that_is_no_json_schema_is_refused_before_anything_runs(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "data.jsonl", 1)
    config = write_config(tmp_path / "c.yaml", data, format={"type": "no such type"})
    result = invoke("run", config, "--out", tmp_path / "out")
    assert result.exit_code == 2 and "format" in result.stderr
    assert "not a valid JSON schema" in result.stderr and not (tmp_path / "out").exists()


def test_the_cli_sample_flags_reach_the_engine(tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps({"type": "object", "required": ["n"]}))
    scripted = ("--backend", "scripted", "--reply", RAMBLE, "--reply", '{"n": 1}')
    stopped = invoke("sample", "q", *scripted, "--require", "max-words:3", "--loop-budget", "1")
    assert stopped.exit_code == 1  # the rambling reply was stopped early, and failed
    assert "✂ blah" in stopped.stderr and "stopped early: 1" in stopped.stderr
    whole = invoke(
        "sample", "q", *scripted, "--require", "max-words:3", "--no-early-stop", "--json"
    )
    assert json.loads(whole.stdout)["attempts"][0]["text"] == RAMBLE
    launched = invoke(
        "sample", "q", *scripted, "--concurrency", "3", "--launch", "on_failure",
        "--loop-budget", "1", "--format", schema, "--json",
    )  # fmt: skip
    shown = json.loads(launched.stdout)
    assert launched.exit_code == 0 and shown["text"] == '{"n": 1}'
    assert shown["attempts"][0]["validations"][0]["passed"] is False  # RAMBLE is no JSON
    assert shown["not_started"] == 1  # 0 failed, 1 passed: 2 never had to start
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    refused = invoke("sample", "q", *scripted, "--format", bad)
    assert refused.exit_code == 2 and "must hold a JSON schema (an object)" in refused.stderr
