"""A run that cannot write (a full disk, a file too large) stops in one line with the way on.

The run is a real ``samplehooks run`` in a child process whose files may not grow past a
limit (``RLIMIT_FSIZE``: writes then fail as on a full disk); it ends with one error line
naming the cause and the ``--resume`` command, exit status 2, no traceback, and that
resume completes the run with every prompt once. A config string no file can hold (a lone
surrogate) is refused before anything is written.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.reliability_helpers import assert_refused, invoke

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")


def write_run(tmp_path: Path, count: int) -> Path:
    dataset = tmp_path / "data.jsonl"
    dataset.write_text(
        "".join(json.dumps({"id": f"k{i}", "prompt": "q"}) + "\n" for i in range(count))
    )
    config = {
        "dataset": {"path": str(dataset), "id_field": "id"},
        "backend": {"kind": "scripted", "replies": ["word " * 100]},
        "run": {"flush_every": 1},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def samplehooks(*args: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    def small_files() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "sampling_core.cli", *args],
        capture_output=True,
        text=True,
        preexec_fn=small_files,
        timeout=300,
    )


def test_a_full_disk_stops_the_run_in_one_line_and_resume_completes_it(tmp_path: Path) -> None:
    config, out = write_run(tmp_path, 200), tmp_path / "run"
    stopped = samplehooks("run", str(config), "--out", str(out), limit=40_000)
    assert stopped.returncode == 2, stopped.stderr
    assert "Traceback" not in stopped.stderr
    (error,) = [line for line in stopped.stderr.splitlines() if "error" in line]
    assert error.startswith("samplehooks: error: the run stopped: File too large")
    assert error.endswith(f"samplehooks run {config} --out {out} --resume")
    resumed = samplehooks("run", str(config), "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    keys = [json.loads(line)["key"] for line in (out / "records.jsonl").open()]
    assert sorted(keys) == sorted(f"k{i}" for i in range(200))


def test_a_config_string_no_file_can_hold_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    config = write_run(tmp_path, 1)
    body = yaml.safe_load(config.read_text())
    body["backend"]["replies"] = ["a lone \udc80 surrogate"]  # YAML writes it "\uDC80"
    config.write_text(yaml.safe_dump(body, allow_unicode=False))
    out = tmp_path / "run"
    assert_refused(
        invoke("run", config, "--out", out), "backend.replies[0]: holds \\udc80", "lone surrogate"
    )
    assert not out.exists()
    fine = write_run(tmp_path, 1)
    assert_refused(
        invoke("run", fine, "--out", out, "--plugin", "recorder:path=a\udcffb"),
        "plugins[0].options.path: holds \\udcff",
    )
    assert not out.exists()
    assert invoke("run", fine, "--out", out).exit_code == 0
    rescored = tmp_path / "rescored"
    assert_refused(
        invoke("rescore", out, "--out", rescored, "--require", "contains:a\udcffb"),
        "requirements[0].contains: holds \\udcff",
    )
    assert not rescored.exists()


@pytest.mark.parametrize("limit", [5_000, 40_000], ids=["meta", "records"])
def test_a_full_disk_stops_a_rescore_in_one_line_and_leaves_no_folder(
    tmp_path: Path, limit: int
) -> None:
    config, run = write_run(tmp_path, 200), tmp_path / "run"
    assert samplehooks("run", str(config), "--out", str(run)).returncode == 0
    before = sorted(p.name for p in tmp_path.iterdir())
    new = tmp_path / "rescored"
    rescore = ("rescore", str(run), "--out", str(new), "--require", "contains:word")
    stopped = samplehooks(*rescore, limit=limit)
    assert stopped.returncode == 2, stopped.stderr
    assert "Traceback" not in stopped.stderr
    (error,) = [line for line in stopped.stderr.splitlines() if "error" in line]
    assert error.startswith("samplehooks: error: the rescore stopped: File too large")
    assert error.endswith("make room, then run the same command again")
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no half-written folder
    again = samplehooks(*rescore)
    assert again.returncode == 0, again.stderr
    assert (new / "report.json").is_file() and (new / "view.html").is_file()
