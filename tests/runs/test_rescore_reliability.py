"""Rescore under hostile conditions: Ctrl-C part way, ``--out`` a link, a staging folder
left by a rescore killed with ``kill -9``; what a rescored run says of itself; and
``trace show --text`` telling a damaged ``texts.jsonl`` line from a missing one."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from filelock import FileLock
from typer.testing import CliRunner

from sampling_core import ScriptedBackend
from sampling_core.cli.app import app
from sampling_core.kinds import KindRegistry, collect_kinds
from sampling_core.requirements.checks import Requirement
from sampling_core.runs import RunDirError, rescore_sync, run_batch_sync
from tests.support.runs_helpers import write_config, write_dataset

LONG = " ".join(f"word{i}" for i in range(50))


def source(tmp_path: Path, prompts: int = 20, **blocks: object) -> Path:
    config = write_config(
        tmp_path / "run.yaml",
        write_dataset(tmp_path / "d.jsonl", prompts),
        requirements=[{"max_words": 500}],
        **blocks,
    )
    run_batch_sync(config, tmp_path / "src", backend=ScriptedBackend([LONG]))
    return tmp_path / "src"


def test_ctrl_c_stops_a_rescore_at_once_and_leaves_nothing(tmp_path: Path) -> None:
    src = source(tmp_path)
    calls: list[str] = []

    def interrupting(value: str) -> Requirement:
        def check(text: str) -> bool:
            calls.append(text)
            if len(calls) == 3:
                signal.raise_signal(signal.SIGINT)  # Ctrl-C, while the 3rd record is checked
            return True

        return Requirement("interrupts", check)

    kinds: KindRegistry = collect_kinds()
    kinds.register("requirement", "interrupts", interrupting, plugin="tests")
    with pytest.raises(KeyboardInterrupt):
        rescore_sync(src, tmp_path / "new", requirements=[{"interrupts": "x"}], kinds=kinds)
    assert len(calls) == 3  # acted on before the next record, not after all 20
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl", "run.yaml", "src"]


def test_an_out_that_is_a_symbolic_link_is_refused_before_anything_is_done(
    tmp_path: Path,
) -> None:
    src = source(tmp_path, prompts=2)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "new").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RunDirError, match="is a symbolic link"):
        rescore_sync(src, tmp_path / "new", requirements=[{"max_words": 3}])
    assert list((tmp_path / "elsewhere").iterdir()) == []
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(RunDirError, match="is a symbolic link"):
        rescore_sync(src, tmp_path / "dangling", requirements=[{"max_words": 3}])
    assert not (tmp_path / "nowhere").exists()


def test_a_staging_folder_left_by_a_killed_rescore_is_removed_by_the_next(
    tmp_path: Path,
) -> None:
    src = source(tmp_path, prompts=2)
    killed = tmp_path / ".new.rescore-999999"  # a rescore killed with kill -9 left it
    (killed / "deep").mkdir(parents=True)
    (killed / "deep" / "records.jsonl").write_text("{}\n")
    busy = tmp_path / ".other.rescore-4242"  # one another rescore is building right now
    busy.mkdir()
    lock = FileLock(f"{busy}.lock", timeout=0, thread_local=False)
    with lock:
        rescore_sync(src, tmp_path / "new", requirements=[{"max_words": 3}])
        rescore_sync(src, tmp_path / "other-new", requirements=[{"max_words": 3}])
        assert busy.is_dir()  # held: left alone
    assert not killed.exists() and (tmp_path / "new" / "records.jsonl").is_file()
    assert not any(p.name.startswith(".new.") for p in tmp_path.iterdir())


def test_a_rescored_run_says_where_it_came_from_and_not_to_resume(tmp_path: Path) -> None:
    src = source(tmp_path, prompts=2)
    rescore_sync(src, tmp_path / "new", requirements=[{"max_words": 3}])
    header = [
        line
        for line in (tmp_path / "new" / "effective_config.yaml").read_text().splitlines()
        if line.startswith("#")
    ]
    text = "\n".join(header)
    assert f"# source: rescored from {src.resolve()}" in header
    assert "# source: (Python API)" not in text and "--resume" not in text
    assert "nothing to resume" in text


def test_trace_show_text_calls_a_damaged_texts_line_damaged(tmp_path: Path) -> None:
    src = source(tmp_path, prompts=1, plugins=["recorder"], budgets={"early_stop": False})
    texts = src / "texts.jsonl"
    texts.write_text("{not json\n")  # the call's one line, damaged
    shown = CliRunner().invoke(app, ["trace", "show", str(src / "events.jsonl"), "--text"])
    assert shown.exit_code == 0, shown.output
    assert "damaged line" in shown.output and "line 1" in shown.output
    assert "no texts.jsonl beside the file" not in shown.output
    texts.write_text("")  # no line for it at all
    shown = CliRunner().invoke(app, ["trace", "show", str(src / "events.jsonl"), "--text"])
    assert "holds no line for this call" in shown.output


def test_the_cli_refuses_an_out_link_in_one_line(tmp_path: Path) -> None:
    src = source(tmp_path, prompts=2)
    (tmp_path / "new").symlink_to(tmp_path)
    shown = CliRunner().invoke(
        app, ["rescore", str(src), "--out", str(tmp_path / "new"), "--require", "max_words:3"]
    )
    assert shown.exit_code == 2 and "symbolic link" in shown.output
    assert "Traceback" not in shown.output and os.path.islink(tmp_path / "new")
