"""The resume module's pieces, exactly as a user reads them: the refusal, the header lines,
dataset drift (changed, removed, added, reordered prompts)."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from sampling_core.kinds import LOCATION, THROUGHPUT, Kind, KindRegistry
from sampling_core.runs.config.config import RunConfig
from sampling_core.runs.errors import RunDirError
from sampling_core.runs.resume import resume
from sampling_core.runs.resume.resume import (
    LINEAGE_MARK,
    Difference,
    check_dataset,
    compare_configs,
    lineage_note,
    one_line,
    provenance_header,
    read_effective_config,
    refuse,
    render_effective_config,
)
from sampling_core.runs.store.index import RunIndex
from sampling_core.runs.store.store import RunDirectory
from tests.support.runs_helpers import run_under_ascii_locale

RUN = Path("/runs/r1")


def test_a_difference_shows_old_and_new_as_json() -> None:
    change = Difference("sampling.temperature", "result", 0.2, {"a": [1, "é"]})
    assert str(change) == 'sampling.temperature: 0.2 -> {"a": [1, "é"]}'
    assert str(Difference("x", "result", None, "s")) == 'x: null -> "s"'


def test_a_refusal_lists_the_differences_and_the_ways_out() -> None:
    changes = [Difference("sampling.temperature", "result", 0.2, 0.7)]
    refused = refuse(RUN, changes, drift=False)
    assert str(refused) == "\n".join(
        [
            f"refusing to resume {RUN}: these settings change results, and differ from the "
            "run's (old -> new):",
            "  sampling.temperature: 0.2 -> 0.7",
            "Ways out:",
            "  - resume with the run's own settings: samplehooks run "
            f"{RUN / 'effective_config.yaml'} --out {RUN} --resume; or",
            "  - start a new run with these settings: samplehooks run CONFIG --out NEW_DIR",
            f"Nothing was written to {RUN}.",
        ]
    )
    assert refused.differences == [("sampling.temperature", "0.2", "0.7")]

    drift = refuse(RUN, [Difference("dataset[k]", "result", "h1", None)], drift=True)
    assert str(drift).splitlines()[:4] == [
        f"refusing to resume {RUN}: the dataset changed since the run started (dataset drift; "
        "old -> new content hash):",
        '  dataset[k]: "h1" -> null',
        "Ways out:",
        "  - restore the dataset the run started with, then resume; or",
    ]
    recorded = refuse(RUN, changes, drift=False, recorded=True)
    assert str(recorded).splitlines()[0] == (
        f"refusing to resume {RUN}: these settings change results, and differ from those "
        "recorded in its meta.json when it started (old -> new):"
    )
    assert str(recorded).splitlines()[3] == (
        "  - resume with the settings the run started with (the same server, model and "
        "config: $OPENAI_BASE_URL and the effective config as they were); or"
    )


def test_a_refusal_shows_twenty_differences_then_counts_the_rest() -> None:
    many = [Difference(f"p{n}", "result", n, n + 1) for n in range(23)]
    lines = str(refuse(RUN, many, drift=False)).splitlines()
    assert lines[1] == "  p0: 0 -> 1" and lines[20] == "  p19: 19 -> 20"
    assert lines[21] == "  ... and 3 more" and lines[22] == "Ways out:"
    assert len(refuse(RUN, many, drift=False).differences) == 23
    exactly = str(refuse(RUN, many[:20], drift=False)).splitlines()
    assert exactly[20] == "  p19: 19 -> 20" and exactly[21] == "Ways out:"


def test_header_lines_stay_one_line_each() -> None:
    assert one_line("a\nb\rc\u2028d\x85e") == "a\\nb\\rc\\u2028d\\x85e"
    assert one_line("plain é") == "plain é"
    header = provenance_header("1.2.3", ["samplehooks", "run", "a b.yaml"], None)
    assert header[:3] == [
        "# samplehooks run: the resolved settings of this run (defaults included).",
        "# Resume with: samplehooks run CONFIG --out THIS_DIR --resume",
        "# samplehooks version: 1.2.3",
    ]
    assert header[3].startswith("# created (UTC): 20")
    assert header[4:] == [
        "# argv: samplehooks run 'a b.yaml'",
        "# source: (Python API)",
        LINEAGE_MARK,
    ]
    odd = Path("cfg\n.yaml")
    source = provenance_header("1", ["x"], odd)[5]
    assert source == "# source: " + one_line(str(odd.resolve()))
    assert "\n" not in source

    note = lineage_note([], ["run", "c\n.yaml"], " (extra)")
    assert note.startswith("#   20") and note.endswith(
        " resumed (run 'c\\n.yaml'): no change (extra)"
    )
    changed = lineage_note(
        [Difference("a", "throughput", 1, 2), Difference("b", "throughput", "x", "y\nz")], ["run"]
    )
    assert changed.endswith(' resumed (run): a: 1 -> 2; b: "x" -> "y\\nz"')


class Data:
    """What ``check_dataset`` reads of a dataset: its fingerprint and content hashes."""

    def __init__(self, fingerprint: str, hashes: dict[str, str]) -> None:
        self.fingerprint = fingerprint
        self._hashes = hashes

    def hashes(self) -> Iterator[tuple[str, str]]:
        return iter(self._hashes.items())


def drift(
    tmp_path: Path, hashes: dict[str, str], data: Data, fingerprint: str = "F1"
) -> tuple[list[Difference], int]:
    """``check_dataset`` of a run whose meta.json holds ``hashes`` under ``fingerprint``."""
    run_dir = RunDirectory(tmp_path / "run")
    shutil.rmtree(run_dir.path, ignore_errors=True)
    meta = {"format": 1, "dataset": {"count": 0, "fingerprint": fingerprint, "hashes": hashes}}
    run_dir.create("x: 1\n", meta)
    with RunIndex.build(run_dir) as index:
        return check_dataset(index, data)  # type: ignore[arg-type]


def test_dataset_drift_names_each_changed_removed_or_added_prompt(tmp_path: Path) -> None:
    meta = {"a": "ha", "b": "hb", "c": "hc"}
    assert drift(tmp_path, meta, Data("F1", {"a": "other"})) == ([], 0)  # same fingerprint
    assert drift(tmp_path, meta, Data("F2", {"a": "ha", "b": "HB", "d": "hd"})) == (
        [
            Difference("dataset[b]", "result", "hb", "HB"),
            Difference("dataset[d]", "result", None, "hd"),
            Difference("dataset[c]", "result", "hc", None),
        ],
        0,
    )
    reordered = Data("F2", {"c": "hc", "b": "hb", "a": "ha"})
    assert drift(tmp_path, meta, reordered) == (
        [Difference("dataset (order)", "result", "F1", "F2")],
        0,
    )
    assert drift(tmp_path, {}, Data("F2", {"a": "ha"})) == (
        [Difference("dataset[a]", "result", None, "ha")],
        0,
    )


def test_dataset_drift_keeps_the_first_differences_and_counts_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(resume, "DRIFT_KEPT", 3)
    new = {f"k{i}": f"new{i}" for i in range(10)}
    kept, more = drift(tmp_path, {"gone": "h"}, Data("F2", new))
    assert [d.path for d in kept] == ["dataset[k0]", "dataset[k1]", "dataset[k2]"]
    assert more == 8  # 7 more added, and "gone" removed
    message = str(resume.refuse(tmp_path, kept, drift=True, more=more))
    assert "... and 8 more" in message


class JudgeOptions(BaseModel):
    workers: Annotated[int, THROUGHPUT] = 1
    cache: Annotated[str, LOCATION] = ""
    strictness: int = 0


def judged_kinds() -> KindRegistry:
    kinds = KindRegistry()
    kinds.kinds["requirement"]["judged"] = Kind(
        "requirement", "judged", lambda value, **options: None, "tests", JudgeOptions
    )
    return kinds


def config(**changes: Any) -> RunConfig:
    data: dict[str, Any] = {
        "dataset": {"path": "prompts.jsonl"},
        "backend": {"kind": "scripted", "replies": ["a"]},
        "requirements": [{"judged": "q", "workers": 1, "cache": "a", "strictness": 0}],
    }
    data.update(changes)
    return RunConfig.model_validate(data)


def test_compare_configs_labels_plugins_requirement_options_and_skips_locations() -> None:
    kinds = judged_kinds()
    assert compare_configs(config(), config(dataset={"path": "moved.jsonl"}), kinds) == []
    new = config(
        requirements=[{"judged": "q", "workers": 4, "cache": "b", "strictness": 0}],
        plugins=["progress"],
    )
    assert compare_configs(config(), new, kinds) == [
        Difference("requirements[0].workers", "throughput", 1, 4),
        Difference("plugins[progress]", "throughput", None, "progress"),
    ]
    stricter = config(requirements=[{"judged": "q", "workers": 1, "cache": "a", "strictness": 2}])
    assert compare_configs(config(), stricter, kinds) == [
        Difference("requirements[0].strictness", "result", 0, 2)
    ]
    unknown = compare_configs(config(), new)  # unknown kinds: every option counts
    assert [(d.path, d.label) for d in unknown] == [
        ("requirements[0].cache", "result"),
        ("requirements[0].workers", "result"),
        ("plugins[progress]", "throughput"),
    ]


def test_a_config_field_without_a_resume_label_is_a_bug_caught_at_once() -> None:
    class Unlabelled(BaseModel):
        extra: int = 0

    with pytest.raises(TypeError) as raised:
        compare_configs(Unlabelled(), Unlabelled())  # type: ignore[arg-type]
    assert str(raised.value) == "config field extra has no resume label"


class FakeBackendOptions(BaseModel):
    replies: list[str] = Field(default_factory=list)
    workers: Annotated[int, THROUGHPUT] = 1
    cache: Annotated[str, LOCATION] = ""


def test_backend_options_are_compared_resolved_and_by_their_kinds_label() -> None:
    kinds = KindRegistry()
    kinds.kinds["backend"]["fake"] = Kind(
        "backend", "fake", lambda **options: None, "tests", FakeBackendOptions
    )
    old = config(backend={"kind": "fake", "replies": [], "cache": "a"})
    same = config(backend={"kind": "fake", "cache": "b"})  # replies: the factory's default
    assert compare_configs(old, same, kinds) == []
    faster = config(backend={"kind": "fake", "workers": 3, "replies": ["x"]})
    assert compare_configs(old, faster, kinds) == [
        Difference("backend.replies", "result", [], ["x"]),
        Difference("backend.workers", "throughput", 1, 3),
    ]
    # an option of an unknown kind that only one side sets is a difference too
    added = config(backend={"kind": "scripted", "replies": ["a"], "latency": 0.5})
    assert compare_configs(config(), added) == [Difference("backend.latency", "result", None, 0.5)]


def test_requirement_and_plugin_changes_show_both_sides() -> None:
    other = config(requirements=[{"max_words": 5}])
    assert compare_configs(config(), other) == [
        Difference("requirements", "result", [{"judged": "q"}], [{"max_words": 5}])
    ]
    added = config(requirements=[{"judged": "q", "workers": 1, "cache": "a", "level": 2}])
    assert compare_configs(config(), added, judged_kinds()) == [
        Difference("requirements[0].level", "result", None, 2),
        Difference("requirements[0].strictness", "result", 0, None),
    ]
    plugged = config(plugins=["progress", "tracing"])
    assert compare_configs(plugged, config(plugins=["tracing", "progress"])) == []
    assert compare_configs(plugged, config(plugins=["tracing"])) == [
        Difference("plugins[progress]", "throughput", "progress", None)
    ]
    [added] = compare_configs(plugged, config(plugins=["progress", "tracing", "ordering"]))
    assert (added.path, added.label, added.old, added.new) == (
        "plugins[ordering]",
        "result",
        None,
        "ordering",
    )


def test_fields_after_a_location_field_are_still_compared() -> None:
    moved = config(dataset={"path": "moved.jsonl", "prompt_field": "question"})
    assert compare_configs(config(), moved) == [
        Difference("dataset.prompt_field", "result", "prompt", "question")
    ]


def test_a_list_changed_in_place_is_a_difference() -> None:
    """A list of the same length with other items (not a kind's option) is compared item by
    item: generation options, backend options of an unknown kind, a requirement's value."""
    stop = config(options={"stop": ["END"]})
    assert compare_configs(stop, config(options={"stop": ["STOP"]})) == [
        Difference("options.stop", "result", ["END"], ["STOP"])
    ]
    replies = config(backend={"kind": "scripted", "replies": ["b"]})
    assert compare_configs(config(), replies) == [
        Difference("backend.replies", "result", ["a"], ["b"])
    ]
    words = config(requirements=[{"contains_all": ["x", "y"]}])
    assert compare_configs(words, config(requirements=[{"contains_all": ["x", "z"]}])) == [
        Difference(
            "requirements", "result", [{"contains_all": ["x", "y"]}], [{"contains_all": ["x", "z"]}]
        )
    ]


def effective_config_at(tmp_path: Path, body: str) -> RunDirectory:
    (tmp_path / "effective_config.yaml").write_text(
        f"# samplehooks run\n{LINEAGE_MARK}\n{body}", encoding="utf-8"
    )
    return RunDirectory(tmp_path)


def test_an_effective_config_that_does_not_validate_names_every_problem(tmp_path: Path) -> None:
    run_dir = effective_config_at(
        tmp_path,
        "dataset: {path: p.jsonl}\nbackend: {kind: scripted}\n"
        "budgets: {loop_budget: 0, concurrency_budget: x}\n",
    )
    with pytest.raises(RunDirError) as raised:
        read_effective_config(run_dir)
    assert str(raised.value) == (
        f"{run_dir.config_file} is damaged or from an incompatible version: "
        "budgets.loop_budget: Input should be greater than or equal to 1 (got 0); "
        "budgets.concurrency_budget: must be a whole number (an int), not str (got 'x')"
    )


def test_an_effective_config_that_is_not_yaml_names_the_line(tmp_path: Path) -> None:
    run_dir = effective_config_at(tmp_path, "dataset: [\n")
    with pytest.raises(RunDirError) as raised:
        read_effective_config(run_dir)
    assert str(raised.value) == (
        f"{run_dir.config_file} is damaged or from an incompatible version: not valid YAML "
        "(line 4, column 1): expected the node content, but found '<stream end>'"
    )


def test_an_unreadable_effective_config_says_why(tmp_path: Path) -> None:
    (tmp_path / "effective_config.yaml").mkdir()
    run_dir = RunDirectory(tmp_path)
    with pytest.raises(RunDirError) as raised:
        read_effective_config(run_dir)
    assert str(raised.value) == (
        f"cannot read {run_dir.config_file}: [Errno 21] Is a directory: '{run_dir.config_file}'"
    )


LONG = " ".join("abcdefghijklmnopqrstuvwxyz" * 2)


def test_the_effective_config_is_the_models_order_with_text_kept_and_wrapped_at_100() -> None:
    text = render_effective_config(
        config(options={"stop": ["fin é", LONG]}), ["# h1", LINEAGE_MARK]
    )
    lines = text.splitlines()
    assert lines[:3] == ["# h1", "# lineage:", "dataset:"] and text.endswith("\n")
    top = [line.split(":")[0] for line in lines[2:] if not line.startswith((" ", "-"))]
    assert top == list(RunConfig.model_fields)  # the model's order, not sorted
    assert lines[lines.index("  retries:") + 1 :][:3] == [
        "    max_retries: 3",
        "    base_delay_s: 0.5",
        "    max_delay_s: 20.0",
    ]
    stop = lines.index("  stop:")
    assert lines[stop + 1 : stop + 4] == ["  - fin é", f"  - {LONG[:-6]}", "    x y z"]


def test_options_given_from_python_compare_as_the_json_they_are_written_as() -> None:
    """A tuple in a plugin's options (a config built in Python) equals the list the run
    wrote in its effective config: no refusal."""
    written = config(plugins=[{"name": "tracing", "options": {"levels": [1, 2]}}])
    given = config(plugins=[{"name": "tracing", "options": {"levels": (1, 2)}}])
    assert compare_configs(written, given) == []


class ModelFileOptions(BaseModel):
    model_file: Path = Path("m.gguf")


def test_a_path_option_shows_as_its_text() -> None:
    kinds = KindRegistry()
    kinds.kinds["backend"]["local"] = Kind(
        "backend", "local", lambda **options: None, "tests", ModelFileOptions
    )
    old = config(backend={"kind": "local"})
    new = config(backend={"kind": "local", "model_file": "other.gguf"})
    assert compare_configs(old, new, kinds) == [
        Difference("backend.model_file", "result", "m.gguf", "other.gguf")
    ]


READ_UNDER_LOCALE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from sampling_core.runs.resume.resume import read_effective_config
    from sampling_core.runs.store.store import RunDirectory
    header, config = read_effective_config(RunDirectory(Path(sys.argv[1])))
    print(ascii([header[-1], config.options.stop]))
    """
)


def test_the_effective_config_is_read_as_utf_8_whatever_the_locale(tmp_path: Path) -> None:
    header = provenance_header("1.0", ["samplehooks", "run"], None)
    text = render_effective_config(config(options={"stop": ["fin é"]}), header)
    (tmp_path / "effective_config.yaml").write_text(text, encoding="utf-8")
    done = run_under_ascii_locale(READ_UNDER_LOCALE, str(tmp_path))
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    assert done.stdout.decode().strip() == ascii([LINEAGE_MARK, ["fin é"]])
    # and here, the whole round trip (mutmut maps a test to the functions it calls in its
    # own process)
    read_header, read_config = read_effective_config(RunDirectory(tmp_path))
    assert read_header == header
    assert read_config == config(options={"stop": ["fin é"]})
