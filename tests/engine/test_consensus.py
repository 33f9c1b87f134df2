"""Consensus exit: a majority vote ends the call once its pick is settled.

Counts are exact: the number of backend calls, of subsamples cancelled in flight and of
subsamples never started, for a lead settled early, late, and never (a tie).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import anyio
import pytest

from hook_specs import HookName
from sampling_core import GenerationRequest, Sampler, ScriptedBackend, current_iteration
from sampling_core.requirements.checks import matches
from sampling_core.strategies import MajorityVote
from sampling_core.voting import leader_stays, settled, standing

pytestmark = pytest.mark.anyio

NUMBER = [matches(r"^\d+$")]


def by_subsample(answers: list[str]) -> ScriptedBackend:
    def reply(request: GenerationRequest) -> str:
        assert request.iteration is not None
        return answers[request.iteration.subsample_index]

    return ScriptedBackend(reply)


async def vote(answers: list[str], consensus: float | None, **options: Any) -> Any:
    backend = by_subsample(answers)
    sampler = Sampler(backend, load_entrypoints=False)
    result = await sampler.sample(
        "q",
        requirements=NUMBER,
        strategy=MajorityVote(consensus=consensus),
        concurrency_budget=len(answers),
        launch=options.pop("launch", "on_failure"),
        **options,
    )
    return backend, result


@pytest.mark.parametrize(
    ("answers", "calls", "text"),
    [
        (["7", "7", "7", "3", "3"], 3, "7"),  # settled early: 3 against at most 2
        (["7", "3", "3", "7", "7", "7", "3"], 6, "7"),  # settled late: 4-2 with one left
        (["7", "3", "3", "7"], 4, "7"),  # never settled: 7 could tie and win the tie
        (["3", "7", "7", "3", "3"], 5, "3"),  # 2-2 with one left: the last vote decides
    ],
)
async def test_consensus_one_ends_exactly_when_the_pick_is_settled(
    answers: list[str], calls: int, text: str
) -> None:
    backend, result = await vote(answers, 1.0)
    assert backend.calls == calls
    assert result.not_started == len(answers) - calls and result.cancelled == 0
    assert result.success and result.text == text
    _, whole = await vote(answers, None)  # the same pick over the whole budget
    assert whole.text == text and whole.not_started == 0


async def test_failing_answers_do_not_vote_and_their_subsample_tries_again() -> None:
    # subsample 0 fails its first attempt ("seven"), then answers 7 on its second
    def reply(request: GenerationRequest) -> str:
        info = request.iteration
        assert info is not None
        if info.subsample_index == 0 and info.attempt == 1:
            return "seven"
        return ["7", "7", "7", "3"][info.subsample_index]

    backend = ScriptedBackend(reply)
    result = await Sampler(backend, load_entrypoints=False).sample(
        "q",
        requirements=NUMBER,
        strategy=MajorityVote(consensus=1.0),
        loop_budget=2,
        concurrency_budget=4,
        launch="on_failure",
    )
    # 0 fails (1 may start) and passes (2 may start): 7 alone; 1 passes: 7-7 with two open,
    # which can at most tie 2-2 and lose the tie (7 voted first): 2 and 3 never start
    assert backend.calls == 3 and result.not_started == 2 and result.text == "7"
    assert [a.passed for a in result.attempts] == [False, True, True]


async def test_running_subsamples_are_cancelled_once_settled(hook_recorder: Any) -> None:
    gates = [anyio.Event() for _ in range(4)]
    checked = [anyio.Event() for _ in range(4)]
    answers = ["7", "3", "7", "3"]

    async def reply(request: GenerationRequest) -> str:
        assert request.iteration is not None
        index = request.iteration.subsample_index
        await gates[index].wait()
        return answers[index]

    def number(text: str) -> bool:
        """a number"""
        info = current_iteration()
        assert info is not None
        checked[info.subsample_index].set()
        return text.isdigit()

    backend = ScriptedBackend(reply)
    sampler = Sampler(backend, plugins=[hook_recorder], load_entrypoints=False)
    result: Any = None

    async def run() -> None:
        nonlocal result
        result = await sampler.sample(
            "q", requirements=[number], strategy=MajorityVote(consensus=1.0), concurrency_budget=4
        )

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        while backend.calls < 4:  # every subsample's call is in flight
            await anyio.lowlevel.checkpoint()
        for index in range(3):  # answered one after another: 7, then 3, then 7
            gates[index].set()
            await checked[index].wait()
    # 7-3-7 with one open: 3 could tie 2-2 and lose the tie: subsample 3 is cancelled
    assert result.text == "7" and result.iterations_used == 3
    assert result.cancelled == 1 and result.not_started == 0
    (end,) = hook_recorder.payloads(HookName.SAMPLING_LOOP_END)
    assert end.cancelled == 1


@pytest.mark.parametrize(("consensus", "calls"), [(0.79, 1), (0.9, 2), (0.96, 4), (1.0, 4)])
async def test_a_posterior_threshold_ends_the_vote_sooner(consensus: float, calls: int) -> None:
    # P(the leader stays): after 7 (1-0, four open) 1 - (1/15 + 2/15) = 0.8; after 7, 7
    # (2-0, three open) 1 - B(3,4)/B(3,1) = 0.95; after 7, 7, 3 (2-1, two open)
    # 1 - B(3,4)/B(3,2) = 0.8; after 7, 7, 3, 7 (3-1, one open) settled exactly
    backend, result = await vote(["7", "7", "3", "7", "3"], consensus)
    assert backend.calls == calls and result.text == "7"


def test_leader_stays_matches_hand_computed_cases() -> None:
    # 1-0, one open vote: the rival ties with P(X=0) = B(2,2)/B(2,1) = 1/3
    assert math.isclose(leader_stays(1, 0, 1, leader_wins_tie=False), 2 / 3)
    assert math.isclose(leader_stays(1, 0, 1, leader_wins_tie=True), 1.0)
    # 2-0, two open: a 2-2 tie with P = B(3,3)/B(3,1) = 1/10
    assert math.isclose(leader_stays(2, 0, 2, leader_wins_tie=False), 0.9)
    # 2-1, two open: the leader loses only when both go to the rival: B(3,4)/B(3,2) = 1/5
    assert math.isclose(leader_stays(2, 1, 2, leader_wins_tie=True), 0.8)
    # 3-1, three open: P(X=0) = B(4,5)/B(4,2) = 1/14
    assert math.isclose(leader_stays(3, 1, 3, leader_wins_tie=True), float(1 - Fraction(1, 14)))
    assert leader_stays(1, 2, 0, leader_wins_tie=True) == 0.0


def test_settled_weighs_every_way_the_open_votes_can_fall() -> None:
    votes = standing([("7", 0), ("7", 1), ("3", 2)])
    assert settled(votes, [3])  # 3 could tie 2-2, and lose the tie: 7 voted first
    assert settled(standing([("7", 0), ("7", 1)]), [2])  # a new answer could tie, and lose
    assert not settled(standing([("7", 1)]), [0])  # a tie it would win: it comes first
    assert not settled(standing([]), [0])


def test_consensus_is_checked() -> None:
    for bad in (0, 1.5, True, "1"):
        with pytest.raises(ValueError, match="consensus"):
            MajorityVote(consensus=bad)  # type: ignore[arg-type]


async def test_staggered_subsamples_start_only_while_the_vote_is_open() -> None:
    # after the first 7 (1-0, three open) P(the leader stays) = 1 - B(2,4)/B(2,1) = 0.9:
    # the three subsamples still waiting for their turn (an hour away) never start
    backend, result = await vote(["7", "7", "3", "3"], 0.85, launch="staggered", stagger_s=3600)
    assert backend.calls == 1 and result.not_started == 3 and result.text == "7"
