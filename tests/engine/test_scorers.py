"""Scorers: ``register_scorers`` kinds, ``BestOfN(scorer=...)``, a weighted ``MajorityVote``,
scores on attempts and in records."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from hook_specs import hookimpl
from sampling_core import Generation, GenerationRequest, Sampler, ScriptedBackend
from sampling_core.backends.scripted import scripted_logprobs
from sampling_core.kinds import KindError, collect_kinds, default_kinds
from sampling_core.runs import ResumeRefused, run_batch
from sampling_core.runs.reports.report import build_report
from sampling_core.strategies import BestOfN, MajorityVote
from tests.support.runs_helpers import write_config, write_dataset

pytestmark = pytest.mark.anyio


def by_subsample(replies: list[Any]) -> ScriptedBackend:
    return ScriptedBackend(lambda r: replies[r.iteration.subsample_index])


def confident(text: str, p: float) -> Generation:
    tokens = [text]
    return Generation(text, logprobs=scripted_logprobs(tokens, [math.log(p)]))


def length(text: str) -> float:
    """a scorer: longer is better"""
    return float(len(text))


async def test_best_of_n_picks_the_best_scored_attempt() -> None:
    backend = by_subsample(["ab", "abcd", "abc"])
    result = await Sampler(backend, load_entrypoints=False).sample(
        "q", strategy=BestOfN(scorer=length), concurrency_budget=3
    )
    assert result.text == "abcd"
    assert [a.scored for a in result.attempts] == [2.0, 4.0, 3.0]


async def test_passing_attempts_come_first_whatever_their_score() -> None:
    backend = by_subsample(["a long failing answer", "ok"])
    result = await Sampler(backend, load_entrypoints=False).sample(
        "q",
        requirements=[lambda text: text == "ok"],
        strategy=BestOfN(scorer=length),
        concurrency_budget=2,
    )
    assert result.text == "ok" and result.success


async def test_mean_confidence_orders_best_of_n() -> None:
    backend = by_subsample([confident("7", 0.6), confident("8", 0.95), confident("9", 0.8)])
    strategy = BestOfN(scorer=default_kinds().scorer("mean_confidence"))
    result = await Sampler(backend, load_entrypoints=False).sample(
        "q", strategy=strategy, concurrency_budget=3
    )
    assert result.text == "8"
    scores = [a.scored for a in result.attempts]
    assert scores[1] > scores[2] > scores[0]


async def test_mean_confidence_without_logprobs_is_a_clear_error() -> None:
    strategy = BestOfN(scorer=default_kinds().scorer("mean_confidence"))
    with pytest.raises(ValueError, match="needs token log-probabilities"):
        await Sampler(ScriptedBackend(["7"]), load_entrypoints=False).sample("q", strategy=strategy)


async def test_an_llm_judge_scores_through_the_samplers_backend() -> None:
    def reply(request: GenerationRequest) -> str:
        if "Answer to rate" in request.prompt:
            return "9 - great" if "Paris" in request.prompt else "2, wrong"
        return ["Lyon", "Paris"][request.iteration.subsample_index]

    backend = ScriptedBackend(reply)
    strategy = default_kinds().strategy("best_of_n", scorer="llm_judge")
    result = await Sampler(backend, load_entrypoints=False).sample(
        "Capital of France?", strategy=strategy, concurrency_budget=2
    )
    assert result.text == "Paris"
    assert sorted(a.scored for a in result.attempts) == [2.0, 9.0]
    assert backend.calls == 4  # two answers, two ratings


async def test_a_weighted_vote_adds_scores_instead_of_counting() -> None:
    replies = [confident("3", 0.3), confident("3", 0.3), confident("7", 0.99)]
    scorer = default_kinds().scorer("mean_confidence")
    counted = await Sampler(by_subsample(replies), load_entrypoints=False).sample(
        "q", strategy=MajorityVote(), concurrency_budget=3
    )
    weighted = await Sampler(by_subsample(replies), load_entrypoints=False).sample(
        "q", strategy=MajorityVote(weight=scorer), concurrency_budget=3
    )
    assert counted.text == "3" and weighted.text == "7"


def test_a_weighted_vote_has_no_consensus() -> None:
    with pytest.raises(ValueError, match="consensus"):
        MajorityVote(consensus=1.0, weight=length)


class Shortest:
    @staticmethod
    @hookimpl
    def register_scorers(register: Any) -> None:
        register("shortest", lambda: lambda text: -len(text))


async def test_a_plugin_registers_a_scorer_kind() -> None:
    kinds = collect_kinds(extra=[("shortest-plugin", Shortest)])
    assert "shortest" in kinds.names("scorer")
    strategy = BestOfN(scorer=kinds.scorer("shortest"))
    result = await Sampler(by_subsample(["abc", "a", "ab"]), load_entrypoints=False).sample(
        "q", strategy=strategy, concurrency_budget=3
    )
    assert result.text == "a"
    with pytest.raises(KindError, match="unknown scorer kind"):
        kinds.scorer("longest")


def test_python_scorers_are_named_module_colon_function() -> None:
    scorer = default_kinds().scorer("python", function=f"{__name__}:length")
    assert scorer("abc") == 3.0
    with pytest.raises(KindError, match=r"package\.module:function"):
        default_kinds().scorer("python", function="length")


async def test_scores_are_kept_in_records_and_a_changed_scorer_refuses_the_resume(
    tmp_path: Path,
) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    out = tmp_path / "run"
    first = write_config(
        tmp_path / "a.yaml",
        dataset,
        strategy={
            "name": "best_of_n",
            "scorer": {"kind": "python", "function": f"{__name__}:length"},
        },
    )
    await run_batch(first, out)
    record = json.loads((out / "records.jsonl").read_text().splitlines()[0])
    (entry,) = record["attempts"]["each"]
    assert entry["score"] == float(len(entry["text"]))
    second = write_config(tmp_path / "b.yaml", dataset, strategy={"name": "best_of_n"})
    with pytest.raises(ResumeRefused) as info:
        await run_batch(second, out, resume=True)
    assert [d[0] for d in info.value.differences] == ["strategy.scorer"]


async def test_scores_appear_in_the_report_text_and_json(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    config = write_config(
        tmp_path / "a.yaml",
        dataset,
        strategy={
            "name": "best_of_n",
            "scorer": {"kind": "python", "function": f"{__name__}:length"},
        },
        budgets={"concurrency_budget": 3, "loop_budget": 1, "early_exit": False},
    )
    await run_batch(config, tmp_path / "run", backend=by_subsample(["a", "abc", "ab"]))
    report = build_report(tmp_path / "run", rows=True)
    rows = report.as_dict()["prompts"]
    assert [row["score"] for row in rows] == [{"best": 3.0, "mean": 2.0}] * 2
    assert report.as_dict()["scores"] == {"prompts": 2, "mean_best": 3.0, "mean_mean": 2.0}
    assert "2 prompts scored; each one's best, mean 3.000; each one's mean, mean 2.000" in (
        report.render()
    )
    unscored = tmp_path / "b.yaml"
    write_config(unscored, dataset, strategy={"name": "best_of_n"})
    await run_batch(unscored, tmp_path / "plain", backend=by_subsample(["a"]))
    plain = build_report(tmp_path / "plain", rows=True)
    assert plain.scores is None and plain.as_dict()["scores"] is None
    assert plain.as_dict()["prompts"][0]["score"] is None
