"""The run directory's files and messages, exactly as a user reads them.

``meta.json`` and ``progress.json`` byte for byte (two-space indent, non-ASCII text kept,
a final newline), every refusal's whole message, the run lock's behaviour, what a failed
creation leaves (nothing), the sizes ``scan_records`` and ``repair_events`` report, and a
run directory written and read under a locale that is not UTF-8.
"""

from __future__ import annotations

import json
import re
import textwrap
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sampling_core.runs.errors import RunDirError
from sampling_core.runs.store.store import RunDirectory, utc_now
from tests.support.runs_helpers import run_under_ascii_locale

META = {
    "format": 1,
    "version": "1.0",
    "note": "déjà",
    "dataset": {"count": 2, "fingerprint": "f", "hashes": {"clé": "h1", "k2": "hé"}},
}
META_TEXT = """{
  "format": 1,
  "version": "1.0",
  "note": "déjà",
  "dataset": {
    "count": 2,
    "fingerprint": "f",
    "hashes": {
      "clé": "h1",
      "k2": "hé"
    }
  }
}
"""


def refused(action) -> str:
    with pytest.raises(RunDirError) as raised:
        action()
    return str(raised.value)


def records_refused(run_dir: RunDirectory, message: str) -> None:
    """The reader of the records refuses them with ``message``."""
    assert refused(run_dir.scan_records) == message


def test_utc_now_is_the_utc_time_to_the_second(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "XYZ-05:30")  # local time 5 h 30 ahead of UTC
    time.tzset()
    try:
        before = datetime.now(UTC).replace(microsecond=0)
        stamp = utc_now()
        after = datetime.now(UTC)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stamp)
    assert before <= datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC) <= after


def test_meta_json_is_written_indented_with_its_text_kept(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path / "a" / "b" / "run")  # its parents are made too
    run_dir.create("a: 1\n", META)
    assert run_dir.meta_file.read_text(encoding="utf-8") == META_TEXT
    assert run_dir.read_meta() == META
    assert run_dir.config_file.read_text(encoding="utf-8") == "a: 1\n"
    assert run_dir.records_file.read_bytes() == b""
    streamed = RunDirectory(tmp_path / "streamed")
    hashes = iter(META["dataset"]["hashes"].items())
    streamed.create("a: 1\n", {**META, "dataset": {**META["dataset"], "hashes": hashes}})
    assert streamed.meta_file.read_text(encoding="utf-8") == META_TEXT
    plain = RunDirectory(tmp_path / "plain")
    plain.create("", {"format": 1, "note": "é"})
    assert plain.meta_file.read_text(encoding="utf-8") == '{\n  "format": 1,\n  "note": "é"\n}\n'


def test_progress_json_is_written_indented_with_its_text_kept(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path)
    run_dir.write_progress({"done": 1, "sessions": [{"elapsed_s": 1.5, "note": "é"}]})
    assert run_dir.progress_file.read_text(encoding="utf-8") == (
        '{\n  "done": 1,\n  "sessions": [\n    {\n      "elapsed_s": 1.5,\n'
        '      "note": "é"\n    }\n  ]\n}\n'
    )
    assert not (tmp_path / ".progress.json.tmp").exists()


def test_a_failed_creation_leaves_nothing_behind(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path / "run")
    with pytest.raises(TypeError):
        run_dir.create("a: 1\n", {"format": 1, "bad": object()})
    assert list(tmp_path.iterdir()) == []


def test_a_run_directory_that_cannot_be_made_says_why(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    run_dir = RunDirectory(tmp_path / "file" / "run")
    assert refused(lambda: run_dir.create("", META)) == (
        f"cannot create the run directory {run_dir.path}: File exists"
    )


def test_what_is_not_a_run_directory_is_named(tmp_path: Path) -> None:
    missing = RunDirectory(tmp_path / "nothing")
    assert refused(missing.check_is_run) == (
        f"{missing.path} does not exist: there is no run to resume "
        "(leave out --resume to start one)"
    )
    assert refused(lambda: missing.check_is_run(resuming=False)) == (
        f"{missing.path} does not exist (give a run directory)"
    )
    (tmp_path / "file").write_text("x", encoding="utf-8")
    a_file = RunDirectory(tmp_path / "file")
    assert refused(a_file.check_is_run) == f"{a_file.path} is a file, not a run directory"
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "meta.json").write_text("{}", encoding="utf-8")
    empty = RunDirectory(tmp_path / "empty")
    assert refused(empty.check_is_run) == (
        f"{empty.path} is not a samplehooks run directory "
        "(missing effective_config.yaml, records.jsonl)"
    )


def test_a_symbolic_link_among_the_run_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.json").write_text("{}", encoding="utf-8")
    (tmp_path / "progress.json").symlink_to(tmp_path / "elsewhere.json")
    run_dir = RunDirectory(tmp_path)
    assert refused(run_dir.refuse_symlinks) == (
        f"{run_dir.progress_file} is a symbolic link; samplehooks never reads or writes a run "
        "file through one: replace it by the file itself (nothing was written)"
    )


def test_the_run_lock_refuses_a_second_holder_at_once_and_is_released(tmp_path: Path) -> None:
    first, second = RunDirectory(tmp_path), RunDirectory(tmp_path)
    first.lock()
    later = threading.Timer(0.05, first.unlock)  # a wait would get the lock: none is made
    later.start()
    try:
        assert refused(second.lock) == (
            f"{tmp_path} is in use by another samplehooks process; wait for it to end"
        )
    finally:
        later.join()
    second.lock()  # released, from another thread
    second.unlock()
    first.lock()
    first.unlock()


def test_damaged_meta_is_named_with_what_is_wrong(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path)
    run_dir.meta_file.write_text("{oops", encoding="utf-8")
    assert refused(run_dir.read_meta) == (
        f"{run_dir.meta_file} is damaged: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)"
    )
    run_dir.meta_file.write_text("[" * 100_000, encoding="utf-8")
    assert refused(run_dir.read_meta) == f"{run_dir.meta_file} is damaged: nested too deeply"


def test_unreadable_run_files_are_named(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path)
    run_dir.progress_file.mkdir()
    run_dir.records_file.mkdir()
    assert refused(run_dir.read_progress) == (
        f"cannot read {run_dir.progress_file}: [Errno 21] Is a directory: '{run_dir.progress_file}'"
    )
    records_refused(
        run_dir,
        f"cannot read {run_dir.records_file}: [Errno 21] Is a directory: '{run_dir.records_file}'",
    )


def test_damaged_progress_and_records_say_what_to_do(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path)
    run_dir.progress_file.write_text("not json", encoding="utf-8")
    assert refused(run_dir.read_progress) == (
        f"{run_dir.progress_file} is damaged; it holds only counts and session history: "
        "delete it to go on (the counts are rebuilt from the records)"
    )
    run_dir.records_file.write_text('{"key": "a", "status": "ok"}\ngarbage\n', encoding="utf-8")
    records_refused(
        run_dir,
        f"{run_dir.records_file}:2 is damaged (not a record); "
        "repair or remove that line, or start a new run",
    )


def test_a_last_record_without_its_newline_is_kept_whole(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path)
    data = b'{"key": "a", "status": "ok"}\n{"key": "b", "status": "ok"}'
    run_dir.records_file.write_bytes(data)
    seen: list[tuple[int, int, str]] = []
    scan = run_dir.scan_records(lambda line, at, record: seen.append((line, at, record.key)))
    assert seen == [(1, 0, "a"), (2, 29, "b")]
    assert (scan.count, scan.good_size, scan.torn, scan.unterminated) == (2, len(data), b"", True)
    assert (run_dir.read_record_at(29).key, run_dir.read_record_at(29).status) == ("b", "ok")
    run_dir.drop_torn_tail(scan)
    assert run_dir.records_file.read_bytes() == data + b"\n"


def test_repairing_events_reports_the_bytes_dropped(tmp_path: Path) -> None:
    run_dir = RunDirectory(tmp_path)
    assert run_dir.repair_events() == 0  # no file
    run_dir.events_file.write_bytes(b'{"a": 1}\n{"b": 2}\n{"c"')
    assert run_dir.repair_events() == 4
    assert run_dir.events_file.read_bytes() == b'{"a": 1}\n{"b": 2}\n'
    assert run_dir.repair_events() == 0


LOCALE_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from sampling_core.runs.store.store import RunDirectory
    meta = json.loads(sys.argv[2])
    run_dir = RunDirectory(Path(sys.argv[1]))
    run_dir.create("prompt: \\u00e9\\n", meta)
    run_dir.write_config("prompt: \\u00fc\\n")
    run_dir.write_progress({"note": "\\u00df"})
    print(json.dumps([run_dir.read_meta(), run_dir.read_progress()]))
    """
)


def test_a_run_directory_is_utf_8_whatever_the_locale(tmp_path: Path) -> None:
    """Under a plain ASCII locale (no UTF-8 mode), files are still written and read as UTF-8."""
    done = run_under_ascii_locale(LOCALE_SCRIPT, str(tmp_path / "run"), json.dumps(META))
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    assert json.loads(done.stdout) == [META, {"note": "ß"}]
    run_dir = RunDirectory(tmp_path / "run")
    assert run_dir.meta_file.read_text(encoding="utf-8") == META_TEXT
    assert run_dir.config_file.read_text(encoding="utf-8") == "prompt: ü\n"
    assert run_dir.progress_file.read_text(encoding="utf-8") == '{\n  "note": "ß"\n}\n'
    # The same here (so that mutmut, which maps tests to the functions they call in its own
    # process, runs this test on the mutants of these functions too).
    here = RunDirectory(tmp_path / "here")
    here.create("prompt: é\n", META)
    here.write_config("prompt: ü\n")
    here.write_progress({"note": "ß"})
    assert [here.read_meta(), here.read_progress()] == [META, {"note": "ß"}]
    for name in ("meta.json", "effective_config.yaml", "progress.json"):
        assert (here.path / name).read_bytes() == (run_dir.path / name).read_bytes()
