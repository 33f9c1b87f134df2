"""maj@k in runs: answers on attempts, vote profiles in records, the report, ``run_end``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hook_specs import HookName
from sampling_core.runs import rescore_sync, run_batch_sync
from sampling_core.runs.reports.report import build_report
from sampling_core.runs.stats.majk import maj_at_k
from sampling_core.testing import HookRecorder
from sampling_core.view import run_data
from tests.support.runs_helpers import records

# Two prompts, four samples each; replies cycle per prompt by the call's seed-free order.
QUESTIONS = [
    {"id": "q1", "prompt": "2+3?", "answer": "5", "alt": "7"},
    {"id": "q2", "prompt": "7+5?", "answer": "12", "alt": "7"},
]


def _config(tmp_path: Path, replies: list[str], **blocks: Any) -> Path:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    config: dict[str, Any] = {
        "dataset": {"path": str(data), "id_field": "id"},
        "backend": {"kind": "scripted", "replies": replies},
        "budgets": {"loop_budget": 1, "concurrency_budget": 4, "early_exit": False},
        "requirements": [{"equals_field": "answer", "extract": "last_number"}],
        "seed": 3,
        "run": {"max_concurrent_prompts": 1},
        **blocks,
    }
    path = tmp_path / "run.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def _run(tmp_path: Path, replies: list[str], plugins: Any = (), **blocks: Any) -> Path:
    out = tmp_path / "run"
    run_batch_sync(_config(tmp_path, replies, **blocks), out, plugins=plugins)
    return out


def _profiles(out: Path) -> dict[str, Any]:
    return {r["key"]: r["attempts"]["samples"].get("votes") for r in records(out)}


def test_a_field_check_names_each_answer_and_the_report_gives_maj_at_k(tmp_path: Path) -> None:
    # one prompt at a time: each prompt's four samples are the four replies, in some order
    out = _run(tmp_path, ["it is 5", "12", "7", "7."])
    for record in records(out):
        answers = sorted(e["answer"]["value"] for e in record["attempts"]["each"])
        assert answers == ["12", "5", "7", "7"]
    profiles = _profiles(out)
    assert profiles == {"q1": [[2, False], [1, True], [1, False]]} | {
        "q2": [[2, False], [1, True], [1, False]]
    }
    report = build_report(out)
    profile = ((2, False), (1, True), (1, False))
    assert [(p.k, p.value) for p in report.maj_at_k] == [
        (1, pytest.approx(0.25)),
        (2, pytest.approx(maj_at_k(profile, 2))),
        (4, 0.0),  # "7" is the majority of all four
    ]
    as_json = report.as_dict()["maj_at_k"]
    assert [p["k"] for p in as_json] == [1, 2, 4] and as_json[0]["prompts"] == 2
    assert "maj@1" in report.render()
    assert run_data(out)["maj_at_k"] == as_json  # the view's


def test_no_answer_is_a_vote_that_is_never_right(tmp_path: Path) -> None:
    out = _run(tmp_path, ["no idea", "no clue", "5", "12"])
    for record in records(out):
        values = sorted(e["answer"]["value"] for e in record["attempts"]["each"])
        assert values.count("") == 2
    assert build_report(out).maj_at_k[-1].value == 0.0  # "no answer" wins both prompts


def test_a_majority_strategy_without_a_field_check_groups_its_normalised_answers(
    tmp_path: Path,
) -> None:
    out = _run(
        tmp_path,
        ["Paris", "paris.", "Rome", "PARIS"],
        strategy="majority",
        requirements=[{"contains": "Paris"}],
    )
    assert set(map(json.dumps, _profiles(out).values())) == {"[[3, true], [1, false]]"}
    table = build_report(out).maj_at_k
    assert table[0].value == pytest.approx(0.75) and table[-1].value == 1.0


def test_without_known_answers_there_is_no_maj_at_k(tmp_path: Path) -> None:
    out = _run(tmp_path, ["short"], requirements=[{"max_words": 3}])
    assert set(_profiles(out).values()) == {None}
    report = build_report(out)
    assert report.pass_at_k and report.maj_at_k == []
    assert report.as_dict()["maj_at_k"] is None


def test_run_end_carries_maj_at_k(tmp_path: Path) -> None:
    seen = HookRecorder()
    out = _run(tmp_path, ["5", "12", "7", "7"], plugins=[seen])
    [end] = seen.payloads(HookName.RUN_END)
    assert end.maj_at_k == build_report(out).as_dict()["maj_at_k"] is not None


def test_a_rescore_counts_the_new_checks_answers(tmp_path: Path) -> None:
    out = _run(tmp_path, ["5", "12", "7", "7"])
    rescored = tmp_path / "rescored"
    rescore_sync(
        out,
        rescored,
        config=_config(
            tmp_path,
            ["5", "12", "7", "7"],
            requirements=[{"equals_field": "alt", "extract": "last_number"}],
        ),
    )
    # against "alt" (7 for both), "7" is right and the majority: maj@4 is 1
    assert build_report(rescored).maj_at_k[-1].value == 1.0


def test_a_generation_stopped_early_never_said_its_answer(tmp_path: Path) -> None:
    long = "well, thinking about it for a long while, 5"  # cut by max_words: 3 before the 5
    out = _run(
        tmp_path,
        ["5", long, "7", "5"],
        requirements=[{"max_words": 3}, {"equals_field": "answer", "extract": "last_number"}],
    )
    for record in records(out):
        cut = [e for e in record["attempts"]["each"] if e.get("stopped_early")]
        assert len(cut) == 1 and cut[0]["answer"] == {"value": None, "right": None}
    # the three samples that finished vote: q1 ("5") two right of three, q2 none
    assert _profiles(out) == {"q1": [[2, True], [1, False]], "q2": [[2, False], [1, False]]}


def test_without_a_field_check_a_generation_stopped_early_is_a_wrong_vote(tmp_path: Path) -> None:
    long = "an answer that is much too long for the check"  # cut by max_words: 5
    out = _run(
        tmp_path,
        ["a short answer", long, long],
        strategy="majority",
        requirements=[{"max_words": 5}],
        budgets={"loop_budget": 1, "concurrency_budget": 3, "early_exit": False},
    )
    for record in records(out):
        cut = [e for e in record["attempts"]["each"] if e.get("stopped_early")]
        assert len(cut) == 2 and all(e["answer"]["right"] is False for e in cut)
    # the two cut samples say the same (cut) text: they outvote the short answer
    assert set(map(json.dumps, _profiles(out).values())) == {"[[2, false], [1, true]]"}
    assert build_report(out).maj_at_k[-1].value == 0.0
