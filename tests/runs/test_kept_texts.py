"""Every attempt's whole text is kept in ``texts.jsonl``, crash-safe like the records, and the
view and ``trace show`` can show it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sampling_core import ScriptedBackend
from sampling_core.backends.base import GenerationRequest
from sampling_core.cli.app import app
from sampling_core.runs import RunDirError, run_batch, run_batch_sync
from sampling_core.runs.store import record_writer as record_writer_module
from sampling_core.runs.store.kept_texts import TEXT_KEPT, repair_texts
from sampling_core.runs.store.store import RunDirectory
from sampling_core.view.data import run_data
from tests.support.runs_helpers import records, write_config, write_dataset

LONG = " ".join(f"word{i}" for i in range(600))  # about 4,300 characters


def texts(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "texts.jsonl").read_text().splitlines()]


def answer(request: GenerationRequest) -> str:
    """A long answer first; the repaired attempt (it carries feedback) a short one."""
    return "short" if len(request.messages[-1]["content"]) > 60 else LONG


def test_whole_texts_are_kept_beside_records_that_keep_a_preview(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    config = write_config(  # no early stop: max_words would stop the long answer
        tmp_path / "c.yaml",
        dataset,
        strategy="repair",
        budgets={"loop_budget": 2, "early_stop": False},
    )
    run_batch_sync(config, tmp_path / "run", backend=ScriptedBackend(answer))

    kept = texts(tmp_path / "run")
    recs = records(tmp_path / "run")
    assert [(t["seq"], t["key"], t["sampling_id"]) for t in kept] == [
        (r["seq"], r["key"], r["sampling_id"]) for r in recs
    ]
    first, second = kept[0]["texts"]
    assert (first["subsample"], first["attempt"], first["text"]) == (0, 1, LONG)
    assert "messages" not in first  # attempt 1 sent the prompt itself
    assert (second["attempt"], second["text"]) == (2, "short")
    assert "it must have at most 5" in second["messages"][-1]["content"]  # repaired request
    each = recs[0]["attempts"]["each"]
    assert each[0]["text"] == LONG[:TEXT_KEPT] and "messages" not in each[1]
    assert recs[0]["text"] == "short"


def test_the_texts_of_a_flush_are_written_before_its_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = RunDirectory(tmp_path)
    run_dir.records_file.touch()
    writer = run_dir.open_writer(flush_every=2, fsync=False)
    written: list[str] = []
    real_write = record_writer_module.os.write

    def noting(fd: int, data: Any) -> int:
        written.append(Path(f"/proc/self/fd/{fd}").resolve().name)
        return real_write(fd, data)

    monkeypatch.setattr(record_writer_module.os, "write", noting)
    each = [{"subsample": 0, "attempt": 1, "text": "x" * 500}]
    for seq in (1, 2):
        record = {"seq": seq, "key": f"k{seq}", "status": "ok", "attempts": {"each": each}}
        writer.append(record)
    writer.close()
    assert written == ["texts.jsonl", "records.jsonl"]
    assert len(texts(tmp_path)) == 2 and len(records(tmp_path)) == 2


@pytest.mark.anyio
async def test_a_resume_cuts_the_texts_of_records_a_crash_kept_from_being_written(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path / "c.yaml", write_dataset(tmp_path / "d.jsonl", 6))
    out = tmp_path / "run"
    await run_batch(config, out)
    lines = (out / "records.jsonl").read_bytes().splitlines(keepends=True)
    (out / "records.jsonl").write_bytes(b"".join(lines[:3]))  # killed between the two writes
    with (out / "texts.jsonl").open("ab") as tail:
        tail.write(b'{"seq":7,"key":"p1","texts":[{"te')  # and in the middle of a line
    messages: list[str] = []
    await run_batch(config, out, resume=True, log=messages.append)
    assert any("texts.jsonl ended in texts of records never written" in m for m in messages)
    recs, kept = records(out), texts(out)
    assert [(t["seq"], t["sampling_id"]) for t in kept] == [
        (r["seq"], r["sampling_id"]) for r in recs
    ]
    assert sorted(r["key"] for r in recs) == [f"p{i}" for i in range(6)]


def test_repair_drops_lines_past_the_last_record_and_keeps_what_it_cannot_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "texts.jsonl"
    good = '{"seq":1,"key":"a","sampling_id":"s","texts":[]}\n'
    unknown = "not written by samplehooks\n"
    later = '{"key":"b","seq":2,"texts":[]}\n'  # another key order: parsed whole
    path.write_text(good + unknown + later + '{"seq":3,"te')
    assert repair_texts(path, last_seq=1) == len(later) + len('{"seq":3,"te')
    assert path.read_text() == good + unknown  # a line it cannot read is never cut
    assert repair_texts(path, last_seq=1) == 0
    assert repair_texts(tmp_path / "missing.jsonl", last_seq=1) == 0


@pytest.mark.anyio
async def test_a_texts_file_that_is_a_symbolic_link_refuses_the_resume(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.yaml", write_dataset(tmp_path / "d.jsonl", 2))
    out = tmp_path / "run"
    await run_batch(config, out)
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes((out / "texts.jsonl").read_bytes())
    (out / "texts.jsonl").unlink()
    (out / "texts.jsonl").symlink_to(outside)
    with pytest.raises(RunDirError, match=r"texts\.jsonl is a symbolic link"):
        await run_batch(config, out, resume=True)


def test_the_view_and_trace_show_can_show_whole_texts(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    config = write_config(  # no content captured; no early stop (the answer is long)
        tmp_path / "c.yaml", dataset, plugins=["recorder"], budgets={"early_stop": False}
    )
    run_batch_sync(config, tmp_path / "run", backend=ScriptedBackend([LONG]))
    run = tmp_path / "run"

    def step_texts(data: dict[str, Any]) -> list[str]:
        return [s["text"] for p in data["prompts"] for lane in p["lanes"] for s in lane["steps"]]

    assert step_texts(run_data(run)) == [LONG[:400]] * 2
    assert step_texts(run_data(run, whole_texts=True)) == [LONG] * 2

    shown = CliRunner().invoke(app, ["trace", "show", str(run / "events.jsonl"), "--json"])
    assert shown.exit_code == 0 and "word599" not in shown.output
    shown = CliRunner().invoke(
        app, ["trace", "show", str(run / "events.jsonl"), "--json", "--text"]
    )
    calls = json.loads(shown.output)
    assert [a["text"] for c in calls for a in c["attempts"]] == [LONG] * 2
    printed = CliRunner().invoke(app, ["trace", "show", str(run / "events.jsonl"), "--text"])
    assert printed.exit_code == 0 and printed.output.count("word599") == 2
