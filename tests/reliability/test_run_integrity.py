"""A run directory is what it says it is: records of its own prompts only, the settings it
started with, no file reached through a link, nothing left half made, and odd bytes in
paths, argv or files met with one clear line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from builtin_plugins.recorder import read_events
from sampling_core.runs import run_batch_sync
from tests.support.reliability_helpers import assert_refused, invoke, tree
from tests.support.runs_helpers import records, write_config, write_dataset


def finished_run(
    tmp_path: Path, count: int = 4, name: str = "out", **overrides
) -> tuple[Path, Path]:
    data = write_dataset(tmp_path / f"{name}.jsonl", count)
    config = write_config(tmp_path / f"{name}.yaml", data, **overrides)
    result = invoke("run", config, "--out", tmp_path / name)
    assert result.exit_code == 0, result.output
    return config, tmp_path / name


@pytest.mark.parametrize("damage", ["other key", "other hash", "both"])
def test_records_that_are_not_of_the_run_are_never_counted(tmp_path: Path, damage: str) -> None:
    config, run = finished_run(tmp_path, 4)
    _, other = finished_run(tmp_path, 6, name="other", requirements=[{"max_words": 9}])
    # By key: the file holds them in completion order, which varies from run to run (kept
    # prompts must not share a key with a foreign record, or the foreign one replaces them).
    mine, theirs = sorted(records(run), key=lambda r: r["key"]), records(other)
    keep = {"other key": mine[:2], "other hash": mine[:3], "both": mine[:2]}[damage]
    foreign = {
        "other key": [r for r in theirs if r["key"] in ("p4", "p5")],
        "other hash": [{**mine[3], "content_hash": "sha256:" + "0" * 32}],
        "both": [r for r in theirs if r["key"] in ("p3", "p4", "p5")],
    }[damage]
    if damage == "both":  # p3 there has this run's hash? then it is this run's: make it differ
        foreign = [
            {**r, "content_hash": "sha256:" + "1" * 32} if r["key"] == "p3" else r for r in foreign
        ]
    lines = "".join(json.dumps(r) + "\n" for r in [*keep, *foreign])
    (run / "records.jsonl").write_text(lines)
    before = tree(run)
    report = invoke("report", run, "--json")
    assert report.exit_code == 0, report.output
    data = json.loads(report.stdout)
    shown = data["totals"]
    assert shown["done"] == len(keep) and shown["pending"] == 4 - len(keep)
    assert shown["foreign_records"] == len(foreign)
    # the report's own rows (and what it counts from them) are this run's records only
    assert [r["key"] for r in data["prompts"]] == [r["key"] for r in keep]
    text = invoke("report", run).stdout
    assert "complete" not in text and "not of this run" in text
    refused = invoke("run", config, "--out", run, "--resume")
    line = assert_refused(refused, "not of this run", "remove those lines")
    assert "-" not in line.split("records.jsonl")[0][-3:]  # no negative count anywhere
    assert tree(run) == before
    # the way out works: remove the lines and resume
    (run / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in keep))
    resumed = invoke("run", config, "--out", run, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "complete" in invoke("report", run).stdout
    assert sorted(r["key"] for r in records(run)) == ["p0", "p1", "p2", "p3"]


def test_the_server_from_the_environment_is_a_result_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = write_dataset(tmp_path / "d.jsonl", 2)
    config = write_config(
        tmp_path / "c.yaml",
        data,
        backend={"kind": "openai", "model": "m", "api_key_env": "NOKEY_X"},
    )
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens: errors
    assert invoke("run", config, "--out", tmp_path / "out").exit_code == 0
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert meta["settings"]["values"]["backend (resolved).base_url"] == "http://127.0.0.1:9/v1"
    before = tree(tmp_path / "out")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8/v1")  # another server
    refused = invoke("run", config, "--out", tmp_path / "out", "--resume", "--retry-failed")
    assert_refused_block(refused, "backend (resolved).base_url", "127.0.0.1:9", "127.0.0.1:8")
    assert tree(tmp_path / "out") == before
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert invoke("run", config, "--out", tmp_path / "out", "--resume").exit_code == 0


def assert_refused_block(result, *fragments: str) -> None:
    assert result.exit_code == 2 and result.stdout == "", result.output
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)
    assert "Traceback" not in result.stderr


def test_a_hand_edited_effective_config_does_not_mix_settings(tmp_path: Path) -> None:
    _, run = finished_run(tmp_path, 3)
    effective = run / "effective_config.yaml"
    text = effective.read_text()
    effective.write_text(text.replace("max_words: 5", "max_words: 50"))
    before = tree(run)
    refused = invoke("run", effective, "--out", run, "--resume")
    assert_refused_block(refused, "meta.json", "requirements", "max_words")
    assert tree(run) == before
    effective.write_text(text)  # put back: the run's own settings resume
    assert invoke("run", effective, "--out", run, "--resume").exit_code == 0


def test_a_hand_edited_backend_option_is_caught_by_its_kinds_label(tmp_path: Path) -> None:
    backend = {"kind": "scripted", "replies": ["a short answer"], "latency_s": 0.0}
    _, run = finished_run(tmp_path, 3, backend=backend)
    meta = json.loads((run / "meta.json").read_text())
    values = meta["settings"]["values"]
    assert values["backend.replies"] == ["a short answer"]  # the kind labels it a result
    assert "backend.latency_s" not in values  # throughput: may change on resume
    effective = run / "effective_config.yaml"
    text = effective.read_text()
    assert "a short answer" in text and "latency_s: 0.0" in text
    effective.write_text(text.replace("a short answer", "another answer"))
    before = tree(run)
    refused = invoke("run", effective, "--out", run, "--resume")
    assert_refused_block(refused, "meta.json", "backend.replies", "another answer")
    assert tree(run) == before
    effective.write_text(text.replace("latency_s: 0.0", "latency_s: 0.001"))
    assert invoke("run", effective, "--out", run, "--resume").exit_code == 0


@pytest.mark.parametrize(
    "name",
    [
        "records.jsonl",
        "progress.json",
        "meta.json",
        "effective_config.yaml",
        "events.jsonl",
        ".lock",
        ".progress.json.tmp",
    ],
)
def test_a_symlinked_run_file_is_refused_and_its_target_untouched(
    tmp_path: Path, name: str
) -> None:
    config, run = finished_run(tmp_path, 3, plugins=["recorder"])
    outside = tmp_path / "outside.txt"
    target = run / name
    if target.exists():
        outside.write_bytes(target.read_bytes() + b'{"torn')  # a torn tail, to tempt a truncate
        target.unlink()
    else:
        outside.write_bytes(b"precious\n")
    target.symlink_to(outside)
    kept = outside.read_bytes()
    for args in (["run", config, "--out", run, "--resume"], ["report", run]):
        result = invoke(*args)
        assert_refused(result, "symbolic link", name)
    assert outside.read_bytes() == kept


def test_a_whole_last_record_without_its_newline_is_kept(tmp_path: Path) -> None:
    config, run = finished_run(tmp_path, 4)
    data = (run / "records.jsonl").read_bytes()
    (run / "records.jsonl").write_bytes(data.rstrip(b"\n"))
    resumed = invoke("run", config, "--out", run, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "4 of 4 prompts done, 0 to run" in resumed.stderr
    assert (run / "records.jsonl").read_bytes() == data  # the newline was added, nothing else


def test_a_torn_events_file_is_repaired_on_resume_and_read_with_a_note(tmp_path: Path) -> None:
    config, run = finished_run(tmp_path, 3, plugins=["recorder"])
    events = run / "events.jsonl"
    whole = events.read_bytes()
    events.write_bytes(whole + b'{"hook": "sampling_loop_st')
    notes: list[str] = []
    assert len(read_events(events, on_note=notes.append)) == len(whole.splitlines())
    assert notes and "cut off" in notes[0]
    shown = invoke("trace", "show", events)
    assert shown.exit_code == 0 and "note:" in shown.stderr and "cut off" in shown.stderr
    records_file = run / "records.jsonl"
    records_file.write_bytes(b"".join(records_file.read_bytes().splitlines(True)[:2]))
    resumed = invoke("run", config, "--out", run, "--resume")
    assert resumed.exit_code == 0 and "events.jsonl ended in a torn line" in resumed.stderr
    lines = events.read_bytes().splitlines(True)
    assert all(line.endswith(b"\n") for line in lines)
    assert read_events(events) and len(lines) > len(whole.splitlines())


def test_a_run_killed_while_creating_its_directory_leaves_nothing_behind(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d.jsonl", 2)
    config = write_config(tmp_path / "c.yaml", data)
    # a staging folder of a process that was killed (its pid is gone, its lock not held)
    stale = tmp_path / ".out.init-999999"
    stale.mkdir()
    (stale / "meta.json").write_text("{}")
    (tmp_path / ".out.init-999998.lock").write_text("")
    assert invoke("run", config, "--out", tmp_path / "out").exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yaml", "d.jsonl", "out"]


def test_a_sigterm_while_creating_leaves_a_whole_directory_or_none(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d.jsonl", 2)
    config = write_config(tmp_path / "c.yaml", data)
    script = (
        "import os, signal, sys\n"
        "from sampling_core.runs.store import store\n"
        "real = store.RunDirectory._build_in\n"
        "def build(self, *a):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return real(self, *a)\n"
        "store.RunDirectory._build_in = build\n"
        "from sampling_core.runs import run_batch_sync\n"
        f"run_batch_sync({str(config)!r}, {str(tmp_path / 'out')!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert done.returncode != 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert not [n for n in names if n.startswith(".out.init")], names
    if "out" in names:  # whole: it resumes
        assert invoke("run", config, "--out", tmp_path / "out", "--resume").exit_code == 0


@pytest.mark.parametrize("arg", ["a\nb", "x\r\ny", "u\u2028v", "p\x85q", "f\x0cg", "v\x0bw"])
def test_argv_with_line_breaks_keeps_the_header_one_comment_per_line(
    tmp_path: Path, arg: str
) -> None:
    data = write_dataset(tmp_path / "d.jsonl", 2)
    config = write_config(tmp_path / "c.yaml", data)
    run_batch_sync(config, tmp_path / "out", argv=["samplehooks", "run", arg])
    header = (tmp_path / "out" / "effective_config.yaml").read_text().splitlines()
    assert all(line.startswith("#") for line in header[:7]), header[:8]
    run_batch_sync(config, tmp_path / "out", resume=True, argv=["samplehooks", arg])
    assert invoke("run", config, "--out", tmp_path / "out", "--resume").exit_code == 0


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS refuses non-UTF-8 file names")
def test_paths_that_are_not_utf8_are_refused_in_one_line(tmp_path: Path) -> None:
    odd = os.fsdecode(b"caf\xe9")
    data = write_dataset(tmp_path / "d.jsonl", 2)
    config = write_config(tmp_path / "c.yaml", data)
    assert_refused(invoke("run", config, "--out", tmp_path / odd), "not valid UTF-8")
    odd_data = tmp_path / f"{odd}.jsonl"
    odd_data.write_bytes(data.read_bytes())
    odd_config = write_config(tmp_path / f"{odd}.yaml", odd_data)
    assert_refused(invoke("run", odd_config, "--out", tmp_path / "o2"), "not valid UTF-8")
    config2 = tmp_path / "c2.yaml"
    config2.write_text(
        yaml.safe_dump(
            {**yaml.safe_load(config.read_text()), "dataset": {"path": "d.jsonl", "id_field": "id"}}
        )
    )
    assert invoke("run", config2, "--out", tmp_path / "o3").exit_code == 0
    assert not (tmp_path / odd).exists() and not (tmp_path / "o2").exists()


def test_the_run_lock_needs_no_fcntl(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['fcntl'] = None\n"
        "import sampling_core.cli, sampling_core.runs.store.store as s\n"
        "from pathlib import Path\n"
        "d = s.RunDirectory(Path(sys.argv[1]))\n"
        "d.create('# lineage:\\n{}', {})\n"
        "d.lock()\n"
        "try:\n"
        "    s.RunDirectory(Path(sys.argv[1])).lock()\n"
        "except s.RunDirError as e:\n"
        "    print('refused:', e)\n"
        "d.unlock()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "in use by another" in done.stdout
