"""The response cache with ``min_confidence`` and confidence scorers: a cached answer keeps
the facts its checks read (its token log-probabilities), and a call's prefix readers judge a
whole answer a plugin gave as they judge one the backend streamed."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from hook_specs import hookimpl
from sampling_core import Generation, Sampler, ScriptedBackend
from sampling_core.backends.scripted import scripted_logprobs
from sampling_core.kinds import default_kinds
from sampling_core.requirements.confidence import min_confidence
from sampling_core.strategies import BestOfN, MajorityVote

pytestmark = pytest.mark.anyio


def answer(*probabilities: float) -> Generation:
    """A scripted answer of one token per probability, with its log-probabilities."""
    tokens = [f"t{i} " for i in range(len(probabilities))]
    return Generation(
        "".join(tokens), logprobs=scripted_logprobs(tokens, [math.log(p) for p in probabilities])
    )


async def test_a_cached_answer_keeps_its_logprobs_for_a_fixed_threshold(tmp_path: Path) -> None:
    backend = ScriptedBackend(lambda r: answer(*[0.99] * 6))
    async with Sampler(backend, cache=tmp_path / "c.sqlite", load_entrypoints=False) as sampler:
        runs = [
            await sampler.sample("q", requirements=[min_confidence(1.0, window=2)], seed=1)
            for _ in range(2)
        ]
    first, again = runs
    assert backend.calls == 1 and again.attempts[0].cached
    assert first.success and again.success, again.attempts[0].failure_reasons
    assert again.attempts[0].generation.logprobs == first.attempts[0].generation.logprobs


class FreshFirstTwo:
    """Asks the first two subsamples' requests anew (another temperature: another key)."""

    @hookimpl
    def generation_pre_call(self, payload: Any) -> None:
        if payload.subsample_index < 2:
            payload.options = {**payload.options, "temperature": 0.5}


async def test_a_cached_whole_answer_is_held_to_the_calls_calibrated_threshold(
    tmp_path: Path,
) -> None:
    # The first call's answers are all as doubtful: two calibrate, the third is as
    # confident as they are, so none is cut and all three are kept whole. The second call
    # calibrates on two confident answers (asked anew), then gets the third from the cache:
    # held to this call's threshold, as if the backend had streamed it, it fails.
    doubtful = answer(0.99, 0.5, 0.5, 0.5)
    sure = answer(0.99, 0.99, 0.99, 0.99)
    requirement = min_confidence(window=2, warmup=2, keep=0.5)
    path = tmp_path / "c.sqlite"
    vote = {"strategy": MajorityVote(), "concurrency_budget": 3, "launch": "on_failure"}
    async with Sampler(
        ScriptedBackend(lambda r: doubtful), cache=path, load_entrypoints=False
    ) as s:
        first = await s.sample("q", requirements=[requirement], seed=7, **vote)
    assert [a.passed for a in first.attempts] == [True, True, True]
    backend = ScriptedBackend(lambda r: sure)
    async with Sampler(
        backend, cache=path, plugins=[FreshFirstTwo()], load_entrypoints=False
    ) as sampler:
        result = await sampler.sample("q", requirements=[requirement], seed=7, **vote)
    assert [a.cached for a in result.attempts] == [False, False, True]
    assert [a.passed for a in result.attempts] == [True, True, False]
    (reason,) = result.attempts[2].failure_reasons
    assert "token confidence" in reason
    # it was whole when generated: failed, never "cut" (its provenance says so)
    assert result.attempts[2].provenance.whole and not result.attempts[2].stopped_early


async def test_a_confidence_scorer_ranks_cached_answers_as_it_ranked_them(
    tmp_path: Path,
) -> None:
    probabilities = [0.6, 0.95, 0.8]
    replies = [answer(p, p) for p in probabilities]
    backend = ScriptedBackend(lambda r: replies[r.iteration.subsample_index])
    strategy = BestOfN(scorer=default_kinds().scorer("mean_confidence"))
    async with Sampler(backend, cache=tmp_path / "c.sqlite", load_entrypoints=False) as sampler:
        runs = [
            await sampler.sample(
                "q", strategy=strategy, concurrency_budget=3, seed=2, options={"logprobs": True}
            )
            for _ in range(2)
        ]
    first, again = runs
    assert backend.calls == 3 and again.cached_calls == 3
    assert again.picked is not None and again.picked.subsample_index == 1
    assert [a.scored for a in again.attempts] == [a.scored for a in first.attempts]


class WholeOnly:
    """A backend that cannot stream: it answers whole, as the scripted one would."""

    def __init__(self, inner: ScriptedBackend) -> None:
        self.inner = inner

    async def generate(self, request: Any) -> Generation:
        return await self.inner.generate(request)


@pytest.mark.parametrize("how", ["early_stop_off", "backend_cannot_stream"])
async def test_a_calibrated_threshold_judges_answers_no_reader_read_as_they_came(
    how: str,
) -> None:
    # two answers calibrate (threshold: the median of their lowest confidences); the third
    # falls below it, the fourth does not. Early stop off, or a backend that cannot stream,
    # cuts nothing, but the third still fails the requirement (it is not passed unjudged).
    replies = [
        answer(0.99, 0.99, 0.99, 0.99),
        answer(0.99, 0.6, 0.6, 0.99),
        answer(0.99, 0.5, 0.5, 0.5),
        answer(0.99, 0.99, 0.9, 0.99),
    ]
    scripted = ScriptedBackend(lambda r: replies[r.iteration.subsample_index])
    backend: Any = WholeOnly(scripted) if how == "backend_cannot_stream" else scripted
    result = await Sampler(backend, load_entrypoints=False).sample(
        "q",
        requirements=[min_confidence(window=2, warmup=2, keep=0.5)],
        strategy=MajorityVote(),
        concurrency_budget=4,
        launch="on_failure",
        early_stop=how != "early_stop_off",
    )
    assert [a.passed for a in result.attempts] == [True, True, False, True]
    assert not any(a.stopped_early for a in result.attempts)
    assert scripted.streams_closed_early == 0


async def test_a_cut_by_a_threshold_is_never_replayed_under_another(tmp_path: Path) -> None:
    # the third answer is cut under the threshold its call calibrated; a call calibrated
    # otherwise (or with a fixed threshold) must judge it afresh: the cut is not kept
    replies = [
        answer(0.99, 0.99, 0.99, 0.99),
        answer(0.99, 0.6, 0.6, 0.99),
        answer(0.99, 0.5, 0.5, 0.5),
    ]
    backend = ScriptedBackend(lambda r: replies[r.iteration.subsample_index])
    vote = {"strategy": MajorityVote(), "concurrency_budget": 3, "launch": "on_failure"}
    async with Sampler(backend, cache=tmp_path / "c.sqlite", load_entrypoints=False) as sampler:
        first = await sampler.sample(
            "q", requirements=[min_confidence(window=2, warmup=2, keep=0.5)], seed=3, **vote
        )
        assert [a.stopped_early for a in first.attempts] == [False, False, True]
        again = await sampler.sample(
            "q", requirements=[min_confidence(window=2, warmup=2, keep=1.0)], seed=3, **vote
        )
    assert [a.cached for a in again.attempts] == [True, True, False]
    assert backend.calls == 4  # the cut answer was asked again
