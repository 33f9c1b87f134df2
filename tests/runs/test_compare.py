"""``samplehooks compare A B`` and ``compare_runs``: prompts matched by key, paired measures,
verdicts, flipped prompts, runs whose checks differ, and the errors a user can cause."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sampling_core.cli import app
from sampling_core.runs import RunComparison, RunError, compare_runs, rescore_sync, run_batch_sync
from sampling_core.runs.reports.compare import success_of
from sampling_core.runs.stats.paired import A_BETTER, B_BETTER, TIED, mcnemar_exact
from sampling_core.runs.store.votes import count_votes

runner = CliRunner()

# 30 prompts: the model that always says 5 solves 3, the one that says 7 solves 20
ANSWERS = ["5"] * 3 + ["7"] * 20 + ["9"] * 7


def _dataset(path: Path, answers: list[str], *, first: int = 0) -> Path:
    lines = [
        {"id": f"q{i:02d}", "prompt": f"question {i}", "answer": answer, "other": "5"}
        for i, answer in enumerate(answers, start=first)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _run(
    tmp_path: Path,
    name: str,
    replies: list[str],
    *,
    dataset: Path | None = None,
    samples: int = 1,
    **blocks: Any,
) -> Path:
    config: dict[str, Any] = {
        "dataset": {
            "path": str(dataset or _dataset(tmp_path / "data.jsonl", ANSWERS)),
            "id_field": "id",
        },
        "backend": {"kind": "scripted", "replies": replies},
        "budgets": {"loop_budget": 1, "concurrency_budget": samples, "early_exit": samples == 1},
        "requirements": [{"equals_field": "answer", "extract": "last_number"}],
        "seed": 5,
        "run": {"max_concurrent_prompts": 1},
        **blocks,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    run_batch_sync(path, tmp_path / name)
    return tmp_path / name


def test_b_better_with_mcnemar_flipped_prompts_and_a_detectable_difference(
    tmp_path: Path,
) -> None:
    a = _run(tmp_path, "a", ["The answer is 5."])
    b = _run(tmp_path, "b", ["7"])
    found = compare_runs(a, b)
    assert (found.both, found.only_a, found.only_b, found.content_differs) == (30, 0, 0, 0)
    assert not found.checks
    success = found.measure("success_rate")
    assert success is not None
    assert (success.a, success.b) == (pytest.approx(0.1), pytest.approx(20 / 30))
    assert success.difference == pytest.approx(17 / 30)
    assert (success.only_a, success.only_b) == (3, 20)
    assert success.p_value == pytest.approx(mcnemar_exact(3, 20))
    assert success.low > 0 and success.verdict == B_BETTER
    assert success.detectable is not None and 0 < success.detectable < 1
    assert found.flipped == (20, 3)
    assert found.better_in_a == ["q00", "q01", "q02"]
    assert found.better_in_b[:2] == ["q03", "q04"]
    assert found.measure("pass@k", 1) is None  # one sample per prompt, early exit: no pass@k
    assert found.notes == []
    several = _run(tmp_path, "several", ["7"], samples=2)
    mixed = compare_runs(a, several)
    assert [m.label for m in mixed.measures] == ["success_rate"]
    assert "only B sampled every prompt several times" in mixed.notes[0]
    assert mixed.notes[0] in mixed.render() and mixed.as_dict()["notes"] == mixed.notes
    # and the other way round
    back = compare_runs(b, a)
    assert back.measure("success_rate").verdict == A_BETTER  # type: ignore[union-attr]
    assert back.flipped == (3, 20)


def test_a_run_against_itself_is_tied(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", ["7"])
    found = compare_runs(a, a).measure("success_rate")
    assert found is not None
    assert (found.difference, found.low, found.high, found.verdict) == (0.0, 0.0, 0.0, TIED)
    assert found.p_value == 1.0
    assert found.detectable == pytest.approx(2.8016 / 30, rel=1e-3)  # as if one had differed


def test_prompts_only_in_one_run_are_counted_and_left_out(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", ["7"], dataset=_dataset(tmp_path / "a.jsonl", ANSWERS[:20]))
    b = _run(tmp_path, "b", ["7"], dataset=_dataset(tmp_path / "b.jsonl", ANSWERS[5:], first=5))
    found = compare_runs(a, b)
    assert (found.both, found.only_a, found.only_b) == (15, 5, 10)
    success = found.measure("success_rate")
    assert success is not None and success.prompts == 15
    assert "15 in both (matched by key); 5 only in A, 10 only in B (left out)" in found.render()
    # a prompt under the same key with another line is compared, and said to differ
    c = _run(tmp_path, "c", ["7"], dataset=_dataset(tmp_path / "c.jsonl", ["7"] * 20))
    changed = compare_runs(a, c)
    assert changed.content_differs == 3  # q00..q02 asked for 5 in A
    assert "3 of them differ in their dataset line" in changed.render()


def test_no_prompt_in_common_is_a_clear_error(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", ["7"], dataset=_dataset(tmp_path / "a.jsonl", ["7"] * 3))
    b = _run(tmp_path, "b", ["7"], dataset=_dataset(tmp_path / "b.jsonl", ["7"] * 3, first=10))
    with pytest.raises(RunError, match="no prompt is in both runs"):
        compare_runs(a, b)


def test_several_samples_per_prompt_give_clustered_pass_at_k_and_maj_at_k(
    tmp_path: Path,
) -> None:
    # four samples per prompt: A's replies hold one 7 in four, B's three
    a = _run(tmp_path, "a", ["5", "7", "9", "9"], samples=4, strategy="majority")
    b = _run(tmp_path, "b", ["7", "7", "5", "7"], samples=4, strategy="majority")
    found = compare_runs(a, b)
    labels = [m.label for m in found.measures]
    assert labels == [
        "success_rate",
        *(f"pass@{k}" for k in (1, 2, 4)),
        *(f"pass^{k}" for k in (1, 2, 4)),
        *(f"maj@{k}" for k in (1, 2, 4)),
    ]
    pass1 = found.measure("pass@k", 1)
    assert pass1 is not None and pass1.p_value is None  # not pass or fail per prompt
    # the 20 "7" prompts: A 1/4, B 3/4; the 3 "5" prompts: 1/4 both; the 7 "9": 2/4, 0
    assert pass1.difference == pytest.approx((20 * 0.5 - 7 * 0.5) / 30)
    assert pass1.verdict == B_BETTER
    maj4 = found.measure("maj@k", 4)
    assert maj4 is not None
    # A's majority is "9", right on the 7 "9" prompts; B's is "7"
    assert (maj4.a, maj4.b) == (pytest.approx(7 / 30), pytest.approx(20 / 30))


def test_runs_with_different_checks_are_compared_and_say_so(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", ["5"], samples=2)
    rescored = tmp_path / "rescored"
    config = tmp_path / "rescore.yaml"
    config.write_text(
        json.dumps(
            {
                "dataset": {"path": str(tmp_path / "data.jsonl"), "id_field": "id"},
                "backend": {"kind": "scripted", "replies": ["5"]},
                "budgets": {"loop_budget": 1, "concurrency_budget": 2, "early_exit": False},
                "requirements": [{"equals_field": "other"}],
                "seed": 5,
                "run": {"max_concurrent_prompts": 1},
            }
        ),
        encoding="utf-8",
    )
    rescore_sync(a, rescored, config=config)
    found = compare_runs(a, rescored)
    assert found.checks and found.rescored_from == (None, str(a))
    assert found.checks["requirements"] == {
        "a": [{"equals_field": "answer"}],
        "b": [{"equals_field": "other"}],
    }
    assert "The runs' checks differ" in found.render()
    assert found.as_dict()["checks_differ"] is True
    success = found.measure("success_rate")
    assert success is not None and (success.a, success.b) == (0.1, 1.0)


def test_an_outcome_not_known_is_never_a_pass() -> None:
    assert [success_of(s) for s in ("ok", "failed", "error")] == [1.0, 0.0, 0.0]
    assert success_of("not_known") is None  # left out of the success rate, not a pass
    # a sample whose outcome is not known is no sample: maj@k's n is reduced
    each = [
        {"subsample": 0, "attempt": 1, "passed": True, "answer": {"value": "7", "right": True}},
        {"subsample": 1, "attempt": 1, "passed": None, "answer": {"value": "7", "right": True}},
        {
            "subsample": 3,
            "attempt": 1,
            "passed": False,
            "not_known": True,
            "answer": {"value": "7"},
        },
        {"subsample": 2, "attempt": 1, "passed": False, "answer": {"value": "5", "right": False}},
    ]
    assert count_votes(each) == ((1, True), (1, False))


def test_the_command_prints_text_or_json(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", ["5"])
    b = _run(tmp_path, "b", ["7"])
    text = runner.invoke(app, ["compare", str(a), str(b)])
    assert text.exit_code == 0, text.output
    assert "success_rate" in text.stdout and "B is better" in text.stdout
    assert "McNemar p=" in text.stdout and "Flipped: 20 prompts ok only in B" in text.stdout
    as_json = runner.invoke(app, ["compare", str(a), str(b), "--json"])
    data = json.loads(as_json.stdout)
    assert data["prompts"]["both"] == 30 and data["checks_differ"] is False
    [success] = data["measures"]
    assert success["label"] == "success_rate" and success["verdict"] == "B is better"
    assert data["flipped"]["better_in_a_keys"] == ["q00", "q01", "q02"]
    assert isinstance(compare_runs(a, b), RunComparison)


@pytest.mark.parametrize("which", ["missing", "not_a_run", "disjoint"])
def test_the_command_fails_in_one_line_with_status_2(tmp_path: Path, which: str) -> None:
    a = _run(tmp_path, "a", ["7"], dataset=_dataset(tmp_path / "a.jsonl", ["7"] * 3))
    other = {
        "missing": tmp_path / "nowhere",
        "not_a_run": tmp_path,
        "disjoint": _run(
            tmp_path, "b", ["7"], dataset=_dataset(tmp_path / "b.jsonl", ["7"], first=9)
        ),
    }[which]
    result = runner.invoke(app, ["compare", str(a), str(other)])
    assert result.exit_code == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("samplehooks: error: ")
    assert {
        "missing": "does not exist",
        "not_a_run": "is not a samplehooks run directory",
        "disjoint": "no prompt is in both runs",
    }[which] in line
