"""A damaged run directory: ``run --resume`` and ``report`` refuse it in one line, writing nothing.

And the two damages a crash can leave, which are not refusals: a records file cut off in
the middle of its last line, and a directory whose first progress save never happened.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.support.reliability_helpers import assert_refused, invoke, tree

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A config and a finished run of it (three prompts), made through the CLI once."""
    folder = tmp_path_factory.mktemp("finished")
    dataset = folder / "data.jsonl"
    dataset.write_text("".join(f'{{"id": "p{i}", "prompt": "q{i}?"}}\n' for i in range(3)))
    config = folder / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "dataset": {"path": str(dataset), "id_field": "id"},
                "backend": {"kind": "scripted", "replies": ["an answer"]},
            }
        )
    )
    result = invoke("run", config, "--out", folder / "run")
    assert result.exit_code == 0, result.output
    return config, folder / "run"


@pytest.fixture
def run(finished: tuple[Path, Path], tmp_path: Path) -> Path:
    """A fresh copy of the finished run."""
    return Path(shutil.copytree(finished[1], tmp_path / "run"))


def _rewrite(name: str, change: Callable[[str], str]) -> Callable[[Path], None]:
    def damage(run: Path) -> None:
        path = run / name
        path.write_text(change(path.read_text()))

    return damage


def _header(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if line.startswith("#"))


def _records(change: Callable[[list[str]], list[str]]) -> Callable[[Path], None]:
    return _rewrite("records.jsonl", lambda t: "".join(change(t.splitlines(keepends=True))))


def _set_record(line: int, **fields: object) -> Callable[[Path], None]:
    def change(lines: list[str]) -> list[str]:
        record = json.loads(lines[line - 1])
        record.update(fields)
        lines[line - 1] = json.dumps(record) + "\n"
        return lines

    return _records(change)


def _remove(name: str) -> Callable[[Path], None]:
    return lambda run: (run / name).unlink()


def _replace(name: str, data: bytes) -> Callable[[Path], None]:
    return lambda run: (run / name).write_bytes(data)


# (damage, the file named in the message, what it says, whether `report` reads that file)
DAMAGES = {
    "effective config not YAML": (
        _rewrite("effective_config.yaml", lambda t: t.replace("dataset:", "dataset: [")),
        "effective_config.yaml",
        "not valid YAML (line",
        False,
    ),
    "effective config not a mapping": (
        _rewrite("effective_config.yaml", lambda t: _header(t) + "- dataset\n- backend\n"),
        "effective_config.yaml",
        "Input should be a valid dictionary",
        False,
    ),
    "effective config not UTF-8": (
        _replace("effective_config.yaml", b"# lineage:\n\xff\xfe\n"),
        "effective_config.yaml",
        "not UTF-8 text",
        False,
    ),
    "effective config without its header": (
        _rewrite("effective_config.yaml", lambda t: t.replace("# lineage:", "")),
        "effective_config.yaml",
        "provenance header is missing",
        False,
    ),
    "effective config missing": (
        _remove("effective_config.yaml"),
        "effective_config.yaml",
        "not a samplehooks run directory (missing effective_config.yaml)",
        True,
    ),
    "garbage record in the middle": (
        _records(lambda lines: [lines[0], "garbage\n", *lines[2:]]),
        "records.jsonl:2",
        "is damaged (not a record)",
        True,
    ),
    "garbage complete last record": (
        _records(lambda lines: [*lines, "garbage\n"]),
        "records.jsonl:4",
        "is damaged",
        True,
    ),
    "record nested too deeply": (
        _records(lambda lines: [DEEP + "\n", *lines]),
        "records.jsonl:1",
        "is damaged",
        True,
    ),
    "record whose key is a list": (
        _set_record(1, key=["p0"]),
        "records.jsonl:1",
        "is damaged",
        True,
    ),
    "record whose attempts is text": (
        _set_record(2, attempts="two"),
        "records.jsonl:2",
        "is damaged",
        True,
    ),
    "record with an unknown status": (
        _set_record(3, status="fine"),
        "records.jsonl:3",
        "is damaged",
        True,
    ),
    "record whose usage is a list": (
        _set_record(1, usage=[1, 2]),
        "records.jsonl:1",
        "is damaged",
        True,
    ),
    "records missing": (
        _remove("records.jsonl"),
        "records.jsonl",
        "missing records.jsonl",
        True,
    ),
    "meta missing": (_remove("meta.json"), "meta.json", "missing meta.json", True),
    "meta not JSON": (_replace("meta.json", b"{format: 1"), "meta.json", "is damaged", True),
    "meta of another format": (
        _replace("meta.json", b'{"format": 99}'),
        "meta.json",
        "unknown run directory format",
        True,
    ),
    "meta whose dataset entry is text": (
        _rewrite("meta.json", lambda t: json.dumps({**json.loads(t), "dataset": "data.jsonl"})),
        "meta.json",
        "dataset entry (count, fingerprint, hashes) is missing or malformed",
        True,
    ),
    "progress not JSON": (
        _replace("progress.json", b"\x00\x00\x00"),
        "progress.json",
        "is damaged",
        True,
    ),
    "progress whose sessions is text": (
        _rewrite("progress.json", lambda t: json.dumps({**json.loads(t), "sessions": "one"})),
        "progress.json",
        "delete it to go on",
        True,
    ),
}


@pytest.mark.parametrize("case", DAMAGES)
def test_a_damaged_run_directory_is_refused_in_one_line_and_left_as_it_was(
    case: str, finished: tuple[Path, Path], run: Path
) -> None:
    damage, name, fragment, report_reads_it = DAMAGES[case]
    config = finished[0]
    damage(run)
    before = tree(run)
    assert_refused(invoke("run", config, "--out", run, "--resume"), name, fragment)
    assert tree(run) == before
    report = invoke("report", run)
    if report_reads_it:
        assert_refused(report, name, fragment)
    else:
        assert report.exit_code == 0, report.output
    assert_refused(invoke("run", config, "--out", run), "already holds files")
    assert tree(run) == before


def test_a_run_directory_that_is_not_one_is_refused(tmp_path: Path, finished: tuple[Path, Path]):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "cat.jpg").write_bytes(b"\xff\xd8")
    before = tree(folder)
    assert_refused(
        invoke("run", finished[0], "--out", folder, "--resume"),
        "not a samplehooks run directory",
    )
    assert_refused(invoke("report", folder), "not a samplehooks run directory")
    assert_refused(invoke("report", tmp_path / "none"), "does not exist")
    assert tree(folder) == before


# -- what a crash leaves is resumed, not refused ---------------------------------------------


def test_a_records_file_cut_off_mid_line_is_resumed_without_duplicates(
    finished: tuple[Path, Path], run: Path
) -> None:
    data = (run / "records.jsonl").read_bytes()
    lines = data.splitlines(keepends=True)
    (run / "records.jsonl").write_bytes(b"".join(lines[:2]) + lines[2][:40])  # killed mid-write
    report = invoke("report", run)
    assert report.exit_code == 0 and "2 of 3 prompts done" in report.stdout
    resumed = invoke("run", finished[0], "--out", run, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "torn line" in resumed.stderr
    records = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    assert sorted(r["key"] for r in records) == ["p0", "p1", "p2"]
    assert (run / "records.jsonl").read_bytes().startswith(b"".join(lines[:2]))


def test_a_run_without_progress_json_is_resumed_and_gets_one(
    finished: tuple[Path, Path], run: Path
) -> None:
    # A run killed after its directory was made and before its first progress save.
    (run / "progress.json").unlink()
    (run / "records.jsonl").write_bytes(b"")
    report = invoke("report", run)
    assert report.exit_code == 0 and "0 of 3 prompts done" in report.stdout
    resumed = invoke("run", finished[0], "--out", run, "--resume")
    assert resumed.exit_code == 0, resumed.output
    progress = json.loads((run / "progress.json").read_text())
    assert progress["done"] == 3 and progress["state"] == "finished"
