"""A file a command writes (the view page) never goes through a link, never replaces a run's own
files or a file of another kind, and is never left half-written."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from sampling_core.runs.reports import outputs
from sampling_core.runs.reports.outputs import OutputRefused, write_output
from sampling_core.runs.store.store import RUN_FILES
from tests.support.reliability_helpers import assert_refused, invoke, tree


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of three prompts, with its events (made once)."""
    folder = tmp_path_factory.mktemp("made")
    dataset = folder / "data.jsonl"
    dataset.write_text("".join(f'{{"id": "p{i}", "prompt": "q{i}?"}}\n' for i in range(3)))
    config = folder / "run.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "dataset": {"path": str(dataset), "id_field": "id"},
                "backend": {"kind": "scripted", "replies": ["an answer"]},
                "plugins": ["recorder"],
            }
        )
    )
    assert invoke("run", config, "--out", folder / "run").exit_code == 0
    (folder / "run" / ".lock").touch()  # as while a run holds it
    (folder / "run" / "progress.json").touch()
    return folder / "run"


@pytest.fixture
def run(made: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(made, copy)
    return copy


def test_a_linked_view_page_is_refused_and_its_target_kept(run: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.html"
    outside.write_text("mine")
    (run / "view.html").symlink_to(outside)
    before = tree(tmp_path)
    assert_refused(invoke("view", run), "view.html is a symbolic link", "nothing was written")
    assert tree(tmp_path) == before and outside.read_text() == "mine"
    assert (run / "view.html").is_symlink()
    named = invoke("view", run, "-o", run / "view.html")  # named, the same
    assert_refused(named, "symbolic link")
    dangling = tmp_path / "page.html"
    dangling.symlink_to(tmp_path / "nowhere" / "new.html")
    assert_refused(invoke("view", run, "-o", dangling), "symbolic link")
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("name", sorted(n for n in RUN_FILES if not n.endswith(".tmp")))
def test_a_run_file_is_never_the_page(run: Path, name: str) -> None:
    before = tree(run)
    line = assert_refused(invoke("view", run, "-o", run / name), "is a file of the run")
    assert "give another path with -o" in line
    assert tree(run) == before


def test_a_file_of_another_kind_is_not_overwritten(run: Path, tmp_path: Path) -> None:
    dataset = tmp_path / "data.jsonl"
    dataset.write_text('{"prompt": "keep me"}\n')
    before = tree(tmp_path)
    assert_refused(invoke("view", run, "-o", dataset), "is not a view page (.html or .htm)")
    assert_refused(invoke("view", run, "-o", tmp_path), "exists and is not a file")
    assert tree(tmp_path) == before


def test_the_page_replaces_an_earlier_page_whole(run: Path, tmp_path: Path) -> None:
    page = tmp_path / "pages" / "run.html"
    assert invoke("view", run, "-o", page).exit_code == 0  # its folder is made
    page.write_text("an old page")
    result = invoke("view", run, "-o", page)
    assert result.exit_code == 0, result.output
    assert page.read_text().startswith("<!DOCTYPE html>")
    assert sorted(p.name for p in page.parent.iterdir()) == ["run.html"]  # no temporary left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "page.html"
    page.write_text("old")

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs.os, "fsync", full_disk)
    with pytest.raises(OutputRefused, match=r"cannot write .*page\.html: No space left on device"):
        write_output(page, "new", suffixes=(".html",), what="view page")
    assert page.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["page.html"]


def test_the_page_is_written_to_a_new_file_then_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "page.html"
    page.write_text("old")
    seen: list[tuple[str, str]] = []
    real_replace = os.replace

    def replace(src: str, dst: str) -> None:
        seen.append((Path(src).name, page.read_text()))  # the old page, whole, until now
        real_replace(src, dst)

    monkeypatch.setattr(outputs.os, "replace", replace)
    write_output(page, "new", suffixes=(".html",), what="view page")
    ((name, during),) = seen
    assert name.startswith(".page.html.") and name.endswith(".tmp") and during == "old"
    assert page.read_text() == "new"
