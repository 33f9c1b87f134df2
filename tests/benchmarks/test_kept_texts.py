"""The kept-texts benchmark compares runs as they are with runs whose records are written as
before (previews only), on the same prompts and answers."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.kept_texts import answer_of, one_run, truncated_records, write_inputs
from sampling_core.runs.store.store import RunDirectory


def test_the_baseline_writes_previews_only_and_the_kept_run_whole_texts(tmp_path: Path) -> None:
    config = write_inputs(tmp_path, 6, 2000)
    _, kept_bytes, attempts = one_run(config, tmp_path / "kept", 2000, truncated=False)
    _, truncated_bytes, same = one_run(config, tmp_path / "truncated", 2000, truncated=True)
    assert attempts == same > 6  # the same attempts (repairs included) in both
    assert not (tmp_path / "truncated" / "texts.jsonl").exists()
    previews = [
        e["text"]
        for line in (tmp_path / "truncated" / "records.jsonl").open()
        for e in json.loads(line)["attempts"]["each"]
    ]
    assert {len(text) for text in previews} == {400}
    whole = [
        t["text"]
        for line in (tmp_path / "kept" / "texts.jsonl").open()
        for t in json.loads(line)["texts"]
    ]
    assert len(whole) == attempts and min(map(len, whole)) > 1000
    assert kept_bytes > truncated_bytes
    # the patch of the record writer ends with the baseline's runs
    with truncated_records():
        pass
    assert RunDirectory.open_writer.__qualname__ == "RunDirectory.open_writer"


def test_every_third_prompt_needs_a_repair(tmp_path: Path) -> None:
    config = write_inputs(tmp_path, 24, 200)
    _, _, attempts = one_run(config, tmp_path / "run", 200, truncated=False)
    assert 24 < attempts < 24 * 2  # one repair each for some prompts, never a third try
    assert "max_words: 40" in config.read_text() and answer_of(200).calls == 0
