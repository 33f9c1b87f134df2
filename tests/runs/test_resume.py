"""Batch runs through the Python API: the run directory, resume, refusals, retries, drift."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sampling_core import ScriptedBackend
from sampling_core.runs import ResumeRefused, RunDirError, run_batch
from sampling_core.runs.store.store import RunDirectory
from tests.support.runs_helpers import records, snapshot, write_config, write_dataset

pytestmark = pytest.mark.anyio


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_dataset(tmp_path / "data.jsonl", 6)


@pytest.fixture
def config(tmp_path: Path, dataset: Path) -> Path:
    """The run's config: every default, over :func:`dataset`."""
    return write_config(tmp_path / "a.yaml", dataset)


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """Where the run's directory goes (not made yet)."""
    return tmp_path / "out"


async def test_a_run_writes_config_meta_records_and_progress(
    tmp_path: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch, out: Path
) -> None:
    monkeypatch.setenv("MY_KEY_VAR", "sk-very-secret-value")
    # the config names an openai backend by its key's variable; the run uses a scripted one
    backend = {"kind": "openai", "model": "m", "api_key_env": "MY_KEY_VAR"}
    config = write_config(tmp_path / "run.yaml", dataset, backend=backend)
    scripted = ScriptedBackend(["a short answer"])
    summary = await run_batch(
        config, out, backend=scripted, argv=["samplehooks", "run", "run.yaml"]
    )

    assert (summary.total, summary.ok, summary.done) == (6, 6, 6)
    text = (out / "effective_config.yaml").read_text()
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert any(line.startswith("# samplehooks version: ") for line in header)
    assert any(line.startswith("# created (UTC): 20") for line in header)
    assert "# argv: samplehooks run run.yaml" in header
    assert f"# source: {config.resolve()}" in header
    assert "api_key_env: MY_KEY_VAR" in text
    assert not any(b"sk-very-secret-value" in data for data in snapshot(out).values())

    meta = json.loads((out / "meta.json").read_text())
    assert meta["dataset"]["count"] == 6 and meta["dataset"]["fingerprint"].startswith("sha256:")
    recs = records(out)
    assert sorted(r["key"] for r in recs) == [f"p{i}" for i in range(6)]
    assert [r["seq"] for r in recs] == list(range(1, 7))
    first = recs[0]
    assert first["status"] == "ok" and first["text"] == "a short answer"
    assert first["content_hash"] == meta["dataset"]["hashes"][first["key"]]
    assert first["attempts"]["used"] == 1 and first["attempts"]["each"][0]["passed"] is True
    assert first["usage"]["output_tokens"] == 3 and first["timings"]["elapsed_s"] >= 0
    progress = json.loads((out / "progress.json").read_text())
    assert progress["state"] == "finished" and progress["done"] == 6
    assert len(progress["sessions"]) == 1


async def test_resume_skips_finished_prompts_and_notes_every_resume(
    config: Path, out: Path
) -> None:
    await run_batch(config, out)
    before = (out / "records.jsonl").read_bytes()
    backend = ScriptedBackend(["never used"])
    await run_batch(config, out, resume=True, backend=backend)
    await run_batch(config, out, resume=True)
    assert backend.calls == 0
    assert (out / "records.jsonl").read_bytes() == before
    notes = [
        line
        for line in (out / "effective_config.yaml").read_text().splitlines()
        if "resumed" in line
    ]
    assert len(notes) == 2 and all(note.endswith(": no change") for note in notes)


async def test_throughput_changes_are_accepted_even_in_a_new_block(
    tmp_path: Path, dataset: Path, config: Path, out: Path
) -> None:
    await run_batch(config, out)
    changed = write_config(
        tmp_path / "b.yaml",
        dataset,
        backend={"kind": "scripted", "replies": ["a short answer"], "latency_s": 0.001},
        run={"max_concurrent_prompts": 1, "flush_every": 5},
    )
    await run_batch(changed, out, resume=True)
    text = (out / "effective_config.yaml").read_text()
    note = next(line for line in text.splitlines() if "resumed" in line)
    assert "run.max_concurrent_prompts: 4 -> 1" in note
    assert "run.flush_every: 1 -> 5" in note
    assert "backend.latency_s: 0.0 -> 0.001" in note
    assert "max_concurrent_prompts: 1" in text.split("# lineage:")[1]  # the body is current


async def test_a_result_change_refuses_the_resume_and_writes_nothing(
    tmp_path: Path, dataset: Path, config: Path, out: Path
) -> None:
    await run_batch(config, out)
    before = snapshot(out)
    changed = write_config(
        tmp_path / "b.yaml",
        dataset,
        budgets={"loop_budget": 2},
        requirements=[{"max_words": 6}],
        run={"max_concurrent_prompts": 1},
    )
    with pytest.raises(ResumeRefused) as info:
        await run_batch(changed, out, resume=True)
    assert ("budgets.loop_budget", "1", "2") in info.value.differences
    assert [d[0] for d in info.value.differences] == ["budgets.loop_budget", "requirements"]
    message = str(info.value)
    assert "budgets.loop_budget: 1 -> 2" in message
    assert f"samplehooks run {out}/effective_config.yaml --out {out} --resume" in message
    assert "--out NEW_DIR" in message and "Nothing was written" in message
    assert snapshot(out) == before


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"seed": 12}, "seed"),
        ({"seed": None}, "seed"),
        ({"selection": "ordered"}, "selection"),
        ({"options": {"temperature": 0.5}}, "options.temperature"),
        ({"strategy": "repair"}, "strategy.name"),
        ({"budgets": {"early_stop": False}}, "budgets.early_stop"),
        ({"budgets": {"launch": "on_failure"}}, "budgets.launch"),
        ({"budgets": {"launch": "all", "stagger_s": 0.25}}, "budgets.stagger_s"),
        ({"format": {"type": "object"}}, "format"),
    ],
    ids=[
        "seed",
        "seed-removed",
        "selection",
        "temperature",
        "strategy",
        "early-stop",
        "launch",
        "stagger",
        "format",
    ],
)
async def test_each_setting_that_changes_results_refuses_the_resume(
    tmp_path: Path, dataset: Path, change: dict[str, Any], field: str, config: Path, out: Path
) -> None:
    await run_batch(config, out)
    before = snapshot(out)
    changed = write_config(tmp_path / "b.yaml", dataset, **change)
    backend = ScriptedBackend(["a short answer"])
    with pytest.raises(ResumeRefused) as info:
        await run_batch(changed, out, resume=True, backend=backend)
    assert [d[0] for d in info.value.differences] == [field]
    assert f"\n  {field}: " in str(info.value)
    assert backend.calls == 0 and snapshot(out) == before


async def test_no_resume_into_an_existing_run_and_no_resume_of_nothing(
    tmp_path: Path, config: Path, out: Path
) -> None:
    await run_batch(config, out)
    before = snapshot(out)
    with pytest.raises(RunDirError, match="already holds files; to continue"):
        await run_batch(config, out)
    assert snapshot(out) == before
    with pytest.raises(RunDirError, match="there is no run to resume"):
        await run_batch(config, tmp_path / "elsewhere", resume=True)
    assert not (tmp_path / "elsewhere").exists()
    (tmp_path / "empty").mkdir()
    summary = await run_batch(config, tmp_path / "empty")  # an empty directory is fine
    assert summary.complete


async def test_a_torn_last_line_is_dropped_and_its_prompt_runs_again(
    config: Path, out: Path
) -> None:
    await run_batch(config, out)
    lines = (out / "records.jsonl").read_bytes().splitlines(keepends=True)
    kept = b"".join(lines[:3])
    (out / "records.jsonl").write_bytes(kept + lines[3][:25])  # killed mid-write
    messages: list[str] = []
    summary = await run_batch(config, out, resume=True, log=messages.append)
    assert any("torn line" in m for m in messages)
    data = (out / "records.jsonl").read_bytes()
    assert data.startswith(kept)
    keys = [r["key"] for r in records(out)]
    assert sorted(keys) == [f"p{i}" for i in range(6)]  # each exactly once
    assert summary.complete and [r["seq"] for r in records(out)] == list(range(1, 7))


async def test_a_damaged_line_in_the_middle_is_an_error(config: Path, out: Path) -> None:
    await run_batch(config, out)
    lines = (out / "records.jsonl").read_text().splitlines(keepends=True)
    lines[1] = "garbage\n"
    (out / "records.jsonl").write_text("".join(lines))
    with pytest.raises(RunDirError, match=r"records\.jsonl:2 is damaged"):
        await run_batch(config, out, resume=True)


async def test_retry_failed_reruns_failed_and_errored_prompts(tmp_path: Path, out: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 6, zebra_every=3)  # p0, p3 need "zebra"

    def first(request):  # p1 errors; zebra prompts fail
        if "number 1?" in request.prompt:
            raise RuntimeError("boom")
        return "plain words"

    config = write_config(tmp_path / "a.yaml", dataset)
    summary = await run_batch(config, out, backend=ScriptedBackend(first))
    assert (summary.ok, summary.failed, summary.error) == (3, 2, 1)
    by_key = {r["key"]: r for r in records(out)}
    assert by_key["p1"]["status"] == "error" and "RuntimeError: boom" in by_key["p1"]["reason"]
    assert by_key["p0"]["status"] == "failed" and "zebra" in by_key["p0"]["reason"]

    plain = ScriptedBackend(["still plain"])
    await run_batch(config, out, resume=True, backend=plain)
    assert plain.calls == 0  # without --retry-failed nothing reruns

    second = ScriptedBackend(["a zebra"])
    summary = await run_batch(config, out, resume=True, retry_failed=True, backend=second)
    assert second.calls == 3
    assert (summary.ok, summary.failed, summary.error, summary.total) == (6, 0, 0, 6)
    assert len(records(out)) == 9  # appended, never rewritten
    assert "(--retry-failed)" in (out / "effective_config.yaml").read_text()


async def test_dataset_drift_refuses_the_resume(dataset: Path, config: Path, out: Path) -> None:
    await run_batch(config, out)
    lines = dataset.read_text().splitlines()
    lines[2] = json.dumps({"id": "p2", "prompt": "A different question?"})
    lines.append(json.dumps({"id": "new", "prompt": "Added later?"}))
    dataset.write_text("\n".join(lines) + "\n")
    before = snapshot(out)
    with pytest.raises(ResumeRefused, match="dataset drift") as info:
        await run_batch(config, out, resume=True)
    assert [d[0] for d in info.value.differences] == ["dataset[p2]", "dataset[new]"]
    assert snapshot(out) == before


async def test_a_run_in_use_is_refused(config: Path, out: Path) -> None:
    await run_batch(config, out)
    holder = RunDirectory(out)
    holder.lock()
    try:
        with pytest.raises(RunDirError, match="in use by another samplehooks process"):
            await run_batch(config, out, resume=True)
    finally:
        holder.unlock()


async def test_prompt_seeds_are_distinct_per_prompt_and_stable_across_runs(
    tmp_path: Path, config: Path
) -> None:
    seen: list[dict[str, int]] = []
    for name in ("one", "two"):
        backend = ScriptedBackend(["a short answer"])
        await run_batch(config, tmp_path / name, backend=backend)
        seen.append({r.prompt: r.options["seed"] for r in backend.requests})
    assert seen[0] == seen[1]
    assert len(set(seen[0].values())) == 6


async def test_a_changed_consensus_refuses_the_resume(tmp_path: Path, dataset: Path) -> None:
    out = tmp_path / "vote"
    vote = write_config(tmp_path / "a.yaml", dataset, strategy={"name": "majority"})
    await run_batch(vote, out)
    settled = write_config(
        tmp_path / "b.yaml", dataset, strategy={"name": "majority", "consensus": 1.0}
    )
    with pytest.raises(ResumeRefused) as info:
        await run_batch(settled, out, resume=True)
    assert [d[0] for d in info.value.differences] == ["strategy.consensus"]
