"""Rescore and checks whose verdict needs more than the text: token log-probabilities
(``min_confidence``), a model's reply (an LLM judge), whatever a check of one's own reads
from the generation. When the run did not keep it, the attempt is **not known**: counted
apart, never passed, never failed for it, left out of pass@k and pass^k like an attempt cut
before its end, shown with its bounds; unless a check that can decide failed it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sampling_core import Sampler, ScriptedBackend
from sampling_core.kinds import KindRegistry, collect_kinds
from sampling_core.requirements import CannotDecide, CheckContext, Requirement, llm_judge
from sampling_core.requirements.prefix import WordCount
from sampling_core.runs import rescore, run_batch
from sampling_core.runs.reports.compare import compare_runs
from sampling_core.runs.reports.report import build_report, report_rows
from sampling_core.view.data import run_data
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio

WORDS = "one two three four five six seven eight"


def needs_finish_reason(_: str) -> Requirement:
    """A check of one's own that reads what a rescore may not hold."""

    def check(text: str, context: CheckContext) -> bool:
        if context.generation is None or context.generation.raw is None:
            raise CannotDecide("the check reads the reply's raw body", "the reply's raw body")
        return True

    return Requirement("the raw body says yes", check)


def judged(question: str) -> Requirement:
    return llm_judge(None, question)


def kinds_with_ours() -> KindRegistry:
    kinds = collect_kinds()
    kinds.register("requirement", "raw_says_yes", needs_finish_reason, plugin="tests")
    kinds.register("requirement", "judge", judged, plugin="tests")
    return kinds


async def source(tmp_path: Path, zebra_every: int = 0) -> Path:
    """Three prompts, one whole answer each (no log-probabilities kept), for pass@k;
    with ``zebra_every=2``, p0 and p2 require a word their answer lacks."""
    dataset = write_dataset(tmp_path / "d.jsonl", 3, zebra_every=zebra_every)
    config = write_config(
        tmp_path / "c.yaml",
        dataset,
        requirements=[{"max_words": 20}],
        budgets={"early_exit": False},
    )
    await run_batch(config, tmp_path / "run")
    return tmp_path / "run"


@pytest.mark.parametrize(
    "added",
    [
        {"min_confidence": 0.5},
        {"min_confidence": "calibrated", "warmup": 1},
        {"judge": "Is it right?"},
        {"raw_says_yes": "x"},
    ],
    ids=["min_confidence", "calibrated", "llm_judge", "own_check"],
)
async def test_an_attempt_whose_check_needs_what_the_run_did_not_keep_is_not_known(
    tmp_path: Path, added: dict[str, Any]
) -> None:
    run = await source(tmp_path, zebra_every=2)
    summary = await rescore(run, tmp_path / "new", requirements=[added], kinds=kinds_with_ours())
    rescored = {r["key"]: r for r in records(tmp_path / "new")}
    (entry,) = rescored["p1"]["attempts"]["each"]
    assert entry["not_known"] is True and entry["passed"] is False
    assert rescored["p1"]["attempts"]["not_known"] == 1
    assert rescored["p1"]["attempts"]["samples"] == {"ran": 0, "passed": 0, "not_known": 1}
    assert any("(not known: the check needs" in reason for reason in entry["failed"])
    for key in ("p0", "p2"):  # its own check, which can decide, failed it: known
        assert rescored[key]["attempts"]["samples"] == {"ran": 1, "passed": 0, "not_known": 0}
    assert summary.not_known == 1 and "not known: 1 attempts" in summary.render()
    # the prompt's outcome is not known either: neither ok nor failed, never a bare rate
    assert (summary.ok, summary.failed, summary.not_known_prompts) == (0, 2, 1)
    assert summary.success_rate == 0.0 and summary.done == 3 and summary.complete
    assert "success rate: 0.0% of finished prompts whose outcome is known (1 not known: " in (
        summary.render()
    )
    assert compare_runs(run, tmp_path / "new").as_dict()["prompts"]["not_known"] == 1
    report = build_report(tmp_path / "new")
    assert report.not_known == (1, 1)
    (at_1,) = report.as_dict()["pass_at_k"]
    assert (at_1["value"], at_1["prompts"]) == (0.0, 2)  # over the known samples only
    assert (at_1["not_known"], at_1["if_failed"]) == (1, 0.0)
    assert at_1["if_passed"] == pytest.approx(1 / 3, abs=1e-6)
    text = report.render()
    assert "a check needs what the run did not keep" in text
    assert rescored["p1"]["reason"].endswith("(not known)")  # never called unmet
    assert "  not known p1: " in text and "  failed p0: " in text
    rows = {row.key: row.status for row in report_rows(tmp_path / "new")}
    assert rows == {"p0": "failed", "p1": "not_known", "p2": "failed"}
    (row,) = [p for p in run_data(tmp_path / "new")["prompts"] if p["key"] == "p1"]
    assert [s["outcome"] for lane in row["lanes"] for s in lane["steps"]] == ["not_known"]


async def test_a_check_that_can_decide_still_fails_the_attempt(tmp_path: Path) -> None:
    run = await source(tmp_path)
    added = [{"min_confidence": 0.5}, {"contains": "zebra"}]
    await rescore(run, tmp_path / "new", requirements=added)
    for record in records(tmp_path / "new"):
        (entry,) = record["attempts"]["each"]
        assert "not_known" not in entry and not entry["passed"]
        assert record["status"] == "failed"
        assert record["attempts"]["samples"] == {"ran": 1, "passed": 0, "not_known": 0}


async def test_a_cut_attempt_is_not_failed_by_a_check_that_cannot_read_its_prefix(
    tmp_path: Path,
) -> None:
    # the run cut each answer at its 4th word (max_words: 3) and kept no log-probabilities
    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    config = write_config(
        tmp_path / "c.yaml",
        dataset,
        backend={"kind": "scripted", "replies": [WORDS]},
        requirements=[{"max_words": 3}],
    )
    await run_batch(config, tmp_path / "run")
    assert all(
        e["provenance"]["kind"] == "stopped_early"
        for r in records(tmp_path / "run")
        for e in r["attempts"]["each"]
    )
    lenient = [{"max_words": 50}, {"min_confidence": 0.5}]
    await rescore(
        tmp_path / "run",
        tmp_path / "lenient",
        requirements=lenient,
        config=_only(tmp_path, dataset),
    )
    for record in records(tmp_path / "lenient"):
        (entry,) = record["attempts"]["each"]
        assert entry["not_known"] is True and not entry["passed"]
        assert not any("prefix check raised" in reason for reason in entry["failed"])
    # the check that cut it, still in force, fails it whatever followed
    strict = [{"max_words": 3}, {"min_confidence": 0.5}]
    await rescore(
        tmp_path / "run", tmp_path / "strict", requirements=strict, config=_only(tmp_path, dataset)
    )
    for record in records(tmp_path / "strict"):
        (entry,) = record["attempts"]["each"]
        assert "not_known" not in entry and record["status"] == "failed"


def _only(tmp_path: Path, dataset: Path) -> Path:
    """The run's config with no requirement of its own (those added are the new ones)."""
    return write_config(
        tmp_path / "none.yaml",
        dataset,
        backend={"kind": "scripted", "replies": [WORDS]},
        requirements=[],
    )


async def test_in_a_call_the_missing_data_fails_the_attempt_saying_so() -> None:
    sampler = Sampler(ScriptedBackend(["fine"]), load_entrypoints=False)
    result = await sampler.sample("q", requirements=[needs_finish_reason("x")])
    assert not result.success
    (reason,) = result.attempts[0].failure_reasons
    assert reason == "the check reads the reply's raw body"


def raw_and_short(_: str) -> Requirement:
    """A check that cannot decide without the raw body, whose reader can: at most two words
    (a reader that fails the text decides the requirement, whatever the check says)."""

    def check(text: str, context: CheckContext) -> bool:
        if context.generation is None or context.generation.raw is None:
            raise CannotDecide("the check reads the reply's raw body", "the reply's raw body")
        return True

    return Requirement("raw says yes, in two words", check, reader=lambda notes: WordCount(2))


async def test_a_requirement_its_reader_fails_is_known_though_its_check_cannot_decide(
    tmp_path: Path,
) -> None:
    run = await source(tmp_path)  # each answer: "a short answer", three words
    kinds = kinds_with_ours()
    kinds.register("requirement", "raw_and_short", raw_and_short, plugin="tests")
    await rescore(run, tmp_path / "new", requirements=[{"raw_and_short": "x"}], kinds=kinds)
    for record in records(tmp_path / "new"):
        (entry,) = record["attempts"]["each"]
        assert "not_known" not in entry and not entry["passed"]
        assert record["status"] == "failed"
        assert record["attempts"]["samples"] == {"ran": 1, "passed": 0, "not_known": 0}
