"""``min_confidence``: the confidence stop, fixed and calibrated, and its clear error; the
built-in prefix checks read each piece once (constant work per piece)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from hook_specs import TokenLogprob
from sampling_core import Generation, GenerationRequest, Sampler, ScriptedBackend
from sampling_core.backends.scripted import scripted_logprobs
from sampling_core.cli.kind_args import requirement_arg, strategy_arg
from sampling_core.kinds import default_kinds
from sampling_core.requirements.checks import max_chars, max_words, not_contains
from sampling_core.requirements.confidence import (
    lowest_group_confidence,
    min_confidence,
    quantile,
    token_confidence,
)
from sampling_core.strategies import MajorityVote

pytestmark = pytest.mark.anyio

SURE, UNSURE = math.log(0.99), math.log(0.3)


def answer(*probabilities: float) -> Generation:
    """A scripted answer of one token per probability ("t0 t1 ..."), with logprobs."""
    tokens = [f"t{i} " for i in range(len(probabilities))]
    logprobs = [math.log(p) for p in probabilities]
    return Generation("".join(tokens), logprobs=scripted_logprobs(tokens, logprobs))


def confidence(p: float) -> float:
    """A scripted token's confidence: its own logprob and one alternative sharing 1 - p."""
    return -(math.log(p) + math.log(1 - p)) / 2


def test_token_and_group_confidence_are_deepconfs() -> None:
    token = TokenLogprob("a", -0.1, (("a", -0.1), ("b", -2.0), ("c", -3.0)))
    assert math.isclose(token_confidence(token), (0.1 + 2.0 + 3.0) / 3)
    tokens = scripted_logprobs(["a", "b", "c"], [math.log(p) for p in (0.9, 0.5, 0.9)])
    windows = [(confidence(0.9) + confidence(0.5)) / 2, (confidence(0.5) + confidence(0.9)) / 2]
    assert math.isclose(lowest_group_confidence(tokens, 2), min(windows))
    assert math.isclose(lowest_group_confidence(tokens, 8), sum(map(token_confidence, tokens)) / 3)
    assert quantile([1.0, 3.0], 0.25) == 1.5


async def test_a_low_confidence_stream_is_cut_at_the_first_window_below() -> None:
    reply = answer(*[0.99] * 4, *[0.3] * 6)
    backend = ScriptedBackend(lambda r: reply)
    threshold = (confidence(0.99) + confidence(0.3)) / 2 + 0.01  # the first mixed window
    result = await Sampler(backend, load_entrypoints=False).sample(
        "q", requirements=[min_confidence(threshold, window=2)]
    )
    (attempt,) = result.attempts
    assert attempt.stopped_early and not attempt.passed
    assert attempt.text == "t0 t1 t2 t3 t4 "  # cut at the window (t3, t4)
    assert backend.streams_closed_early == 1
    asked = backend.requests[0].options
    assert asked["logprobs"] is True and asked["top_logprobs"] == 5


async def test_a_confident_stream_runs_to_its_end_and_passes() -> None:
    backend = ScriptedBackend(lambda r: answer(*[0.99] * 6))
    result = await Sampler(backend, load_entrypoints=False).sample(
        "q", requirements=[min_confidence(1.0, window=2)], options={"top_logprobs": 2}
    )
    assert result.success and not result.attempts[0].stopped_early
    assert backend.requests[0].options["top_logprobs"] == 2  # the call's own setting wins


async def test_a_backend_without_logprobs_fails_with_a_clear_reason() -> None:
    for early_stop in (True, False):
        result = await Sampler(ScriptedBackend(["42"]), load_entrypoints=False).sample(
            "q", requirements=[min_confidence(1.0)], early_stop=early_stop
        )
        assert not result.success
        (reason,) = result.attempts[0].failure_reasons
        assert "needs token log-probabilities" in reason and "backend gave none" in reason


async def test_the_calibrated_threshold_comes_from_the_calls_first_whole_answers() -> None:
    # subsamples run one after another (on_failure): 0 and 1 calibrate, never cut; the
    # threshold is the median of their lowest confidences; 2 falls below it, 3 does not
    replies = [
        answer(0.99, 0.99, 0.99, 0.99),
        answer(0.99, 0.6, 0.6, 0.99),
        answer(0.99, 0.5, 0.5, 0.5),
        answer(0.99, 0.99, 0.9, 0.99),
    ]
    backend = ScriptedBackend(lambda r: replies[r.iteration.subsample_index])
    result = await Sampler(backend, load_entrypoints=False).sample(
        "q",
        requirements=[min_confidence(window=2, warmup=2, keep=0.5)],
        strategy=MajorityVote(),
        concurrency_budget=4,
        launch="on_failure",
    )
    cut = [a.stopped_early for a in result.attempts]
    assert cut == [False, False, True, False]
    assert [a.passed for a in result.attempts] == [True, True, False, True]


def test_min_confidence_is_a_kind_for_yaml_and_the_cli() -> None:
    kinds = default_kinds()
    fixed = kinds.requirement("min_confidence", "2.5")
    assert fixed.description == "token confidence at least 2.5"
    calibrated = kinds.requirement("min_confidence", "calibrated", warmup=3)
    assert "calibrated" in calibrated.description and calibrated.reader is not None
    with pytest.raises(ValueError, match="min_confidence"):
        kinds.requirement("min_confidence", "sometimes")
    from_cli = requirement_arg(kinds, "min_confidence:1.5")
    assert from_cli.description == "token confidence at least 1.5"
    assert strategy_arg(kinds, "majority:consensus=0.9").consensus == 0.9


@pytest.mark.parametrize(
    "requirement", [max_words(10**6), max_chars(10**7), not_contains("needle"), "confidence"]
)
def test_built_in_prefix_checks_scan_each_piece_once(requirement: Any) -> None:
    # the characters a built-in examines grow linearly with the text (a check of the whole
    # text after every piece would examine n * (n + 1) / 2 pieces' worth)
    def scanned(pieces: int) -> int:
        if requirement == "confidence":
            reader: Any = min_confidence(0.0).reader({})  # type: ignore[misc]
            tokens = scripted_logprobs(["word "] * pieces, [SURE] * pieces)
            for token in tokens:
                assert reader.feed(token.token, (token,))
            return reader.scanned
        reader = requirement.reader({})
        for _ in range(pieces):
            assert reader.feed("word ", ())
        return reader.scanned

    small, large = scanned(200), scanned(800)
    assert large <= 4 * small + 16
    assert large <= 8 * 800 * len("word ")  # a few characters per character of text


async def test_the_engine_feeds_readers_the_new_text_only() -> None:
    fed: list[str] = []

    class Spy:
        def feed(self, delta: str, logprobs: tuple[TokenLogprob, ...]) -> bool:
            fed.append(delta)
            return True

        def finished(self, generation: Generation) -> None:
            fed.append("<end>")

    from sampling_core.requirements.checks import Requirement

    spy = Requirement("spy", lambda text: True, reader=lambda notes: Spy())
    text = " ".join(f"w{i}" for i in range(50))
    await Sampler(ScriptedBackend([text]), load_entrypoints=False).sample("q", requirements=[spy])
    assert "".join(fed[:-1]) == text and fed[-1] == "<end>"


async def test_a_plain_prefix_function_still_gets_the_whole_text() -> None:
    seen: list[str] = []

    def prefix(text: str) -> bool:
        seen.append(text)
        return "stop" not in text

    from sampling_core.requirements.checks import Requirement

    requirement = Requirement("no stop", lambda text: "stop" not in text, prefix)
    backend = ScriptedBackend(["go on and stop here please"])
    result = await Sampler(backend, load_entrypoints=False).sample("q", requirements=[requirement])
    assert seen[-1] == "go on and stop" and result.attempts[0].stopped_early


async def test_requests_without_the_requirement_ask_for_nothing() -> None:
    backend = ScriptedBackend(["x"])
    await Sampler(backend, load_entrypoints=False).sample("q")
    request: GenerationRequest = backend.requests[0]
    assert "logprobs" not in request.options
