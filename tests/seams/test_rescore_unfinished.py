"""pass@k with several attempts a subsample (``loop_budget`` above 1), then a rescore whose
checks fail the attempt at which a subsample passed in the run: that subsample stopped at
its pass, so the attempts it would have gone on to make never ran, and whether it would
have passed is not known. It is counted not known (the estimate's bounds hold it), never
dropped from n as if the run had cut it, and never counted failed."""

from __future__ import annotations

from pathlib import Path

import pytest

from sampling_core import GenerationRequest, ScriptedBackend
from sampling_core.runs import rescore, run_batch
from sampling_core.runs.reports.report import build_report
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio

# subsample 0 passes "contains cat" at its first attempt and stops there; subsample 1 fails
# it twice (its budget of two spent); subsample 2 passes at its second attempt
REPLIES = {(0, 1): "cat", (1, 1): "dog", (1, 2): "cow", (2, 1): "ant", (2, 2): "cat dog"}


def reply(request: GenerationRequest) -> str:
    info = request.iteration
    assert info is not None
    return REPLIES[(info.subsample_index, info.attempt)]


BUDGETS = {"loop_budget": 2, "concurrency_budget": 3, "early_exit": False}


async def source_run(tmp_path: Path, prompts: int) -> Path:
    """The run (``tmp_path / "a"``) of ``prompts`` prompts with ``contains cat``, sampled
    by :func:`reply` with :data:`BUDGETS`; its dataset is ``tmp_path / "d.jsonl"``."""
    dataset = write_dataset(tmp_path / "d.jsonl", prompts)
    source = write_config(
        tmp_path / "a.yaml", dataset, requirements=[{"contains": "cat"}], budgets=BUDGETS
    )
    await run_batch(source, tmp_path / "a", backend=ScriptedBackend(reply))
    return dataset


async def test_a_subsample_that_stopped_at_a_pass_the_new_checks_fail_is_not_known(
    tmp_path: Path,
) -> None:
    dataset = await source_run(tmp_path, 2)
    for record in records(tmp_path / "a"):
        assert record["attempts"]["samples"] == {"ran": 3, "passed": 2}

    # "contains dog": subsample 0's "cat" fails, and its second attempt never ran (not
    # known); subsample 1 passes at "dog"; subsample 2 fails "ant" and passes "cat dog"
    dog = write_config(
        tmp_path / "b.yaml", dataset, requirements=[{"contains": "dog"}], budgets=BUDGETS
    )
    await rescore(tmp_path / "a", tmp_path / "b", config=dog)
    for record in records(tmp_path / "b"):
        assert record["attempts"]["samples"] == {"ran": 2, "passed": 2, "not_known": 1}
        assert record["rescored"]["not_run"] == 1

    # "contains cow": subsample 0 not known as above; subsample 1 fails "dog" and passes
    # "cow"; subsample 2 spent its budget without a pass (a failed sample: it is known)
    cow = write_config(
        tmp_path / "c.yaml", dataset, requirements=[{"contains": "cow"}], budgets=BUDGETS
    )
    await rescore(tmp_path / "a", tmp_path / "c", config=cow)
    for record in records(tmp_path / "c"):
        assert record["attempts"]["samples"] == {"ran": 2, "passed": 1, "not_known": 1}
    report = build_report(tmp_path / "c").as_dict()
    (one, two) = report["pass_at_k"]
    assert (one["k"], one["value"], one["prompts"]) == (1, 0.5, 2)
    assert (two["k"], two["value"]) == (2, 1.0)
    # pass@1 over the known samples is 1/2; with the one not known failed 1/3, passed 2/3
    assert one["not_known"] == 2  # one sample of each prompt
    assert one["if_failed"] == pytest.approx(1 / 3) and one["if_passed"] == pytest.approx(2 / 3)
    assert report["pass_at_k_not_known"]["samples"] == 2


async def test_a_rescore_of_a_rescore_still_knows_where_the_run_stopped(tmp_path: Path) -> None:
    # the run stopped subsample 0 at "cat"; a first rescore ("contains dog") fails it, and
    # a rescore of that rescore ("contains cow") must still know the run stopped it there
    dataset = await source_run(tmp_path, 1)
    settings = {"budgets": BUDGETS}
    dog = write_config(tmp_path / "b.yaml", dataset, requirements=[{"contains": "dog"}], **settings)
    await rescore(tmp_path / "a", tmp_path / "b", config=dog)
    cow = write_config(tmp_path / "c.yaml", dataset, requirements=[{"contains": "cow"}], **settings)
    await rescore(tmp_path / "b", tmp_path / "c", config=cow)
    (direct,) = records(tmp_path / "c")
    await rescore(tmp_path / "a", tmp_path / "d", config=cow)
    (once,) = records(tmp_path / "d")
    assert direct["attempts"]["samples"] == once["attempts"]["samples"]
    assert once["attempts"]["samples"] == {"ran": 2, "passed": 1, "not_known": 1}


async def test_a_stopped_subsample_whose_pass_is_not_known_is_one_sample_not_known(
    tmp_path: Path,
) -> None:
    # the run stopped subsample 0 at "cat"; the rescore keeps "contains cat" and adds a
    # check that needs log-probabilities the run did not keep: "cat" is not known (not
    # failed), and subsample 0 is one sample not known, not two
    await source_run(tmp_path, 1)
    added = [{"contains": "cat"}, {"min_confidence": 0.5}]
    await rescore(tmp_path / "a", tmp_path / "b", requirements=added)
    (record,) = records(tmp_path / "b")
    # subsample 1 fails "contains cat" twice (known); 0 and 2 passed it with an attempt
    # the new check cannot judge
    assert record["attempts"]["samples"] == {"ran": 1, "passed": 0, "not_known": 2}
