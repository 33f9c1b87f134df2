"""Hostile inputs on the newer surfaces: plugin options, ``plugins new``, verdicts, field
checks in a run, a judge that is down, a run's summary before any prompt finished.

Each refusal is one line on stderr (exit status 2) and writes nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from hook_specs import hookimpl
from sampling_core import PluginError, Requirement, Sampler, ScriptedBackend, ValidationResult
from sampling_core.kinds import collect_kinds
from sampling_core.requirements import llm_judge
from sampling_core.runs import ConfigError, DatasetError, run_batch_sync
from sampling_core.runs.reports.summary import RunSummary
from sampling_core.view import build_page
from tests.support.reliability_helpers import assert_refused, invoke, tree
from tests.support.runs_helpers import records, write_config, write_dataset
from tests.support.view_helpers import make_run

SAMPLE = ("sample", "q", "--backend", "scripted")


@pytest.mark.parametrize(
    ("plugin", "says"),
    [
        ("budget_guard:max_usd_total=lots", "option 'max_usd_total': must be a number"),
        ("progress:console=maybe", "option 'console'"),
        ("budget_guard:max_tokens=1,max_tokens=2", "option 'max_tokens' is given twice"),
    ],
)
def test_a_bad_plugin_option_is_one_line_in_sample_and_run(
    plugin: str, says: str, tmp_path: Path
) -> None:
    assert_refused(invoke(*SAMPLE, "--reply", "x", "--plugin", plugin), says)
    config = write_config(tmp_path / "c.yaml", write_dataset(tmp_path / "d.jsonl", 1))
    before = tree(tmp_path)
    assert_refused(invoke("run", config, "--out", tmp_path / "out", "--plugin", plugin), says)
    assert tree(tmp_path) == before


def test_an_option_given_twice_or_by_two_flags_is_refused_not_overwritten() -> None:
    twice = invoke(*SAMPLE, "--backend-option", "replies=[a]", "--backend-option", "replies=[b]")
    assert_refused(twice, "--backend-option", "option 'replies' is given twice")
    both = invoke(*SAMPLE, "--reply", "a", "--backend-option", "replies=[b]")
    assert_refused(both, "--reply and --backend-option replies=", "give one")
    alone = invoke(*SAMPLE, "--backend-option", "replies=[b]")
    assert alone.exit_code == 0 and alone.stdout.strip() == "b"


def test_plugins_new_refuses_a_file_for_dir_a_file_at_the_target_and_a_long_name(
    tmp_path: Path,
) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    (tmp_path / "samplehooks-taken").write_text("also mine")
    before = tree(tmp_path)
    cases = [
        (("x", "--dir", a_file), "is a file, not a folder"),
        (("taken", "--dir", tmp_path), "samplehooks-taken is a file"),
        (("a" * 300, "--dir", tmp_path), "is 300 characters long; use at most 64"),
        (("tracing", "--dir", tmp_path), "taken by the built-in plugin 'tracing'"),
        (("budget-guard", "--dir", tmp_path), "taken by the built-in plugin 'budget_guard'"),
    ]
    for args, says in cases:
        assert_refused(invoke("plugins", "new", *args), says)
    assert tree(tmp_path) == before


def test_a_verdict_is_strictly_a_bool() -> None:
    for value in ("false", "true", 0, 1, None, [True]):
        with pytest.raises(TypeError, match="must be True or False"):
            ValidationResult(value)  # type: ignore[arg-type]

    def says_false_as_text(text: str) -> ValidationResult:
        return ValidationResult("false")  # type: ignore[arg-type]

    class Forger:
        @hookimpl
        def sampling_validate(self, payload: Any) -> None:
            payload.results = [ValidationResult("true")]  # type: ignore[arg-type]

    sampler = Sampler(ScriptedBackend(["x"]), load_entrypoints=False)
    result = sampler.sample_sync("q", requirements=[Requirement("says", says_false_as_text)])
    [verdict] = result.attempts[0].validations
    assert not result.success and "must be True or False" in (verdict.reason or "")
    with pytest.raises(PluginError, match="must be True or False"):
        Sampler(ScriptedBackend(["x"]), plugins=[Forger()], load_entrypoints=False).sample_sync("q")


def test_no_success_rate_is_shown_before_any_prompt_finished(tmp_path: Path) -> None:
    empty = RunSummary(tmp_path, total=5)
    assert empty.success_rate is None and empty.as_dict()["success_rate"] is None
    assert "success rate: -, no prompt finished yet" in empty.render()
    assert "0.0%" not in empty.render()
    some = RunSummary(tmp_path, total=5, ok=1, failed=3)
    assert some.success_rate == 0.25 and "success rate: 25.0% of finished" in some.render()


def test_recorder_path_is_refused_in_a_run_from_the_command_line_and_the_config(
    tmp_path: Path,
) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 1)
    elsewhere = tmp_path / "elsewhere.jsonl"
    config = write_config(tmp_path / "c.yaml", dataset)
    before = tree(tmp_path)
    flag = invoke("run", config, "--out", tmp_path / "o", "--plugin", f"recorder:path={elsewhere}")
    assert_refused(flag, "'recorder'", "option 'path'", "cannot be used in a batch run")
    named = write_config(
        tmp_path / "named.yaml",
        dataset,
        plugins=[{"name": "recorder", "options": {"path": str(elsewhere)}}],
    )
    with pytest.raises(ConfigError, match=r"option 'path'.*cannot be used in a batch run"):
        run_batch_sync(named, tmp_path / "o")
    assert tree(tmp_path) == {**before, "named.yaml": named.read_bytes()}
    ok = invoke("run", config, "--out", tmp_path / "o", "--plugin", "recorder:capture_content=1")
    assert ok.exit_code == 0 and (tmp_path / "o" / "events.jsonl").is_file()
    assert not elsewhere.exists()


def test_a_misspelt_field_is_refused_before_any_generation(tmp_path: Path) -> None:
    dataset = tmp_path / "d.jsonl"
    dataset.write_text(json.dumps({"id": "a", "prompt": "2+2?", "answer": "4"}) + "\n")
    config = write_config(tmp_path / "c.yaml", dataset, requirements=[{"equals_field": "anwser"}])
    before = tree(tmp_path)
    line = assert_refused(invoke("run", config, "--out", tmp_path / "out"), "d.jsonl:1")
    assert "requirements[0] (equals_field) reads the field 'anwser'" in line
    assert "did you mean 'answer'?" in line and "'id', 'prompt', 'answer'" in line
    own = tmp_path / "own.jsonl"
    own.write_text(
        json.dumps({"id": "a", "prompt": "q", "answer": "4"})
        + "\n"
        + json.dumps({"id": "b", "prompt": "q", "require": [{"contains_field": "anser"}]})
        + "\n"
    )
    with pytest.raises(DatasetError, match=r"own.jsonl:2: require\[0\] \(contains_field\)"):
        run_batch_sync(write_config(tmp_path / "own.yaml", own), tmp_path / "out")
    assert tree(tmp_path) == {
        **before,
        "own.jsonl": own.read_bytes(),
        "own.yaml": (tmp_path / "own.yaml").read_bytes(),
    }


class JudgeKind:
    """A requirement kind ``judged: QUESTION``: the sampler's backend judges."""

    @hookimpl
    def register_requirements(self, register: Any) -> None:
        register("judged", lambda question: llm_judge(None, question))


def test_a_judge_backend_outage_records_prompts_as_errors_not_failures(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    config = write_config(tmp_path / "c.yaml", dataset, requirements=[{"judged": "Right?"}])

    class JudgeDown:
        async def generate(self, request: Any) -> Any:
            if "Answer to judge" in request.messages[-1]["content"]:
                raise ConnectionError("judge server is down")
            return "an answer"

    kinds = collect_kinds(extra=[("judge-kind", JudgeKind())])
    summary = run_batch_sync(config, tmp_path / "out", backend=JudgeDown(), kinds=kinds)
    assert (summary.error, summary.failed) == (2, 0)
    assert all("judge server is down" in r["reason"] for r in records(tmp_path / "out"))


@pytest.mark.parametrize("closing", ["</SCRIPT>", "</Script >", "</sCrIpT\t>", "<!--<script>"])
def test_the_view_escapes_script_endings_in_any_case(tmp_path: Path, closing: str) -> None:
    """A browser ends a script element at ``</script`` in any case: the embedded data must
    hold none, so the data element ends where the page means it to."""
    reply = f"{closing}<b>x"
    out = make_run(tmp_path, "a", backend={"kind": "scripted", "replies": [reply]})
    page = build_page([out])
    start = page.index('<script id="data" type="application/json">') + len(
        '<script id="data" type="application/json">'
    )
    end = re.search(r"</script", page[start:], re.IGNORECASE)
    assert end is not None
    data = json.loads(page[start : start + end.start()])  # what the browser takes as data
    assert data["runs"][0]["prompts"][0]["text"] == reply
    assert "<!--" not in page[start : start + end.start()]


def test_a_run_whose_finished_prompts_are_all_not_known_says_so(tmp_path: Path) -> None:
    # a rescore that could decide none of its prompts: they finished, none is known
    unknown = RunSummary(tmp_path, total=2, not_known_prompts=2)
    assert unknown.done == 2 and unknown.success_rate is None
    text = unknown.render()
    assert "no prompt finished yet" not in text
    assert "success rate: -, no finished prompt's outcome is known (2 not known: " in text
    assert "0.0% to 100.0%)" in text
