"""Crash safety: SIGKILL a running batch at random moments, resume, and lose nothing."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.runs_helpers import write_config, write_dataset

PROMPTS = 60
KILLS = 6


def _complete_part(path: Path) -> bytes:
    """The bytes of the records file up to its last newline (what a resume keeps)."""
    if not path.exists():
        return b""
    data = path.read_bytes()
    return data[: data.rfind(b"\n") + 1]


def _line_count(path: Path) -> int:
    return _complete_part(path).count(b"\n")


def _spawn(config: Path, out: Path) -> subprocess.Popen[bytes]:
    resume = ["--resume"] if (out / "meta.json").exists() else []
    return subprocess.Popen(
        [sys.executable, "-m", "sampling_core.cli", "run", str(config), "--out", str(out), *resume],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _prompts_started(events: Path) -> int:
    """How many ``prompt_start`` events the recorder wrote to ``events`` so far."""
    if not events.exists():
        return 0
    return sum(
        json.loads(line)["hook"] == "prompt_start" for line in _complete_part(events).splitlines()
    )


def _wait_for_growth(proc: subprocess.Popen[bytes], records: Path, target: int) -> None:
    deadline = time.monotonic() + 30
    while _line_count(records) < target and proc.poll() is None:
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.005)


@pytest.mark.slow
def test_sigkill_at_random_moments_then_resume_loses_nothing(tmp_path: Path) -> None:
    rng = random.Random(20240607)
    dataset = write_dataset(tmp_path / "data.jsonl", PROMPTS)
    out = tmp_path / "run"
    records = out / "records.jsonl"
    snapshots: list[bytes] = []
    resumes = 0  # resumes started before the final one
    for kill in range(KILLS):
        config = write_config(
            tmp_path / f"run{kill}.yaml",
            dataset,
            backend={"kind": "scripted", "replies": ["a short answer"], "latency_s": 0.03},
            run={"max_concurrent_prompts": rng.randint(1, 4)},  # throughput may change
        )
        resumes += (out / "meta.json").exists()
        proc = _spawn(config, out)
        if kill == 0 or rng.random() < 0.8:
            _wait_for_growth(proc, records, _line_count(records) + rng.randint(1, 5))
            time.sleep(rng.uniform(0, 0.03))  # land anywhere: mid-write, mid-flush, mid-sample
        else:
            time.sleep(rng.uniform(0, 0.4))  # while starting up
        assert proc.poll() is None, "the run ended before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
        before = _complete_part(records)
        if snapshots:
            assert before.startswith(snapshots[-1]), "a record written before a kill was lost"
        snapshots.append(before)

    final_config = write_config(tmp_path / "final.yaml", dataset, run={"max_concurrent_prompts": 2})
    command = [sys.executable, "-m", "sampling_core.cli", "run", str(final_config)]
    done = subprocess.run(
        [*command, "--out", str(out), "--resume"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"{PROMPTS} of {PROMPTS} prompts done (complete)" in done.stdout

    final = records.read_bytes()
    assert final.endswith(b"\n")
    for snap in snapshots:
        assert final.startswith(snap), "a record written before a kill was lost or changed"
    lines = [json.loads(line) for line in final.splitlines()]
    keys = [r["key"] for r in lines]
    assert sorted(keys) == sorted(f"p{i}" for i in range(PROMPTS))  # each exactly once
    assert [r["seq"] for r in lines] == list(range(1, PROMPTS + 1))
    assert max(len(s.splitlines()) for s in snapshots) < PROMPTS  # the kills interrupted it
    notes = [
        line
        for line in (out / "effective_config.yaml").read_text().splitlines()
        if line.startswith("#") and " resumed (" in line
    ]
    # a resume killed before it wrote its lineage note wrote nothing at all
    assert 1 <= len(notes) <= resumes + 1
    assert f"{final_config} --out {out} --resume): " in notes[-1]


def test_sigterm_flushes_waiting_records_and_marks_the_run_interrupted(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "data.jsonl", PROMPTS)
    config = write_config(
        tmp_path / "run.yaml",
        dataset,
        backend={"kind": "scripted", "replies": ["a short answer"], "latency_s": 0.03},
        plugins=["recorder"],  # its events file shows which prompts started
        run={"max_concurrent_prompts": 1, "flush_every": 1000, "flush_interval_s": 600},
    )
    out = tmp_path / "run"
    proc = _spawn(config, out)
    events = out / "events.jsonl"
    deadline = time.monotonic() + 30
    # One prompt at a time: the second starts once the first one's record is queued (its
    # loop end comes before that, so it would not do).
    while _prompts_started(events) < 2:
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.005)
    assert _line_count(out / "records.jsonl") == 0  # finished records wait in memory
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert b"--resume" in stderr
    assert _line_count(out / "records.jsonl") >= 1
    progress = json.loads((out / "progress.json").read_text())
    assert progress["state"] == "interrupted" and progress["done"] >= 1
