"""Sampling a real model (SmolLM2-135M-Instruct on llama.cpp) with checkable requirements.

The answers vary; the assertions are about structure and counts: success agrees with the
attempts, budgets bound the work, and with the same seeds more loop budget never lowers
the success rate (attempt k gets the same derived seed whatever the budget).
"""

from __future__ import annotations

import pytest

from sampling_core import Sampler, SamplingResult
from sampling_core.backends import OpenAIBackend
from sampling_core.requirements.checks import max_words

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PROMPTS = [
    "Describe the sea in a few words.",
    "What is a cat? Answer briefly.",
    "Name the moon in one short sentence.",
    "Why do birds sing? Be brief.",
    "Say hello.",
]
WORDS = 10
# cache_prompt=False (llama.cpp): attempt k computes the same way whatever ran before it.
OPTIONS = {"max_tokens": 20, "temperature": 1.0, "cache_prompt": False}


def check_consistent(result: SamplingResult, loop_budget: int, concurrency: int) -> None:
    """What every result must satisfy, whatever the model said."""
    assert result.success == (result.picked is not None and result.picked.passed)
    assert result.success == any(a.passed for a in result.attempts)
    assert result.stop_reason == ("success" if result.success else "budget_exhausted")
    assert result.iterations_used == len(result.attempts) <= loop_budget * concurrency
    for index in {a.subsample_index for a in result.attempts}:
        numbers = [a.attempt for a in result.attempts if a.subsample_index == index]
        assert numbers == list(range(1, len(numbers) + 1))  # no gap, no repeat
    for a in result.attempts:
        assert a.passed == (len(a.text.split()) <= WORDS)
        assert a.iteration == a.subsample_index * loop_budget + a.attempt
        assert a.generation.usage.output_tokens <= OPTIONS["max_tokens"]
    if result.success:
        assert result.text == result.picked.text
        assert len(result.text.split()) <= WORDS
    else:
        assert result.iterations_used == loop_budget * concurrency  # all of it was spent
        assert result.cancelled == 0
    # An answer stopped early by max_words (the OpenAI-compatible server does not say its
    # input tokens mid-stream) and one cancelled in flight have unknown input tokens: so
    # has the call then, never a number smaller than what was spent.
    inputs = [a.generation.usage.input_tokens for a in result.attempts]
    if result.usage.input_tokens is None:
        assert None in inputs or result.cancelled
    else:
        assert None not in inputs and result.usage.input_tokens >= sum(inputs)


async def test_more_loop_budget_never_lowers_the_success_rate(llama_server) -> None:
    async with OpenAIBackend("smollm2", base_url=f"{llama_server.base_url}/v1") as backend:
        sampler = Sampler(backend, load_entrypoints=False)
        successes = {}
        for budget in (1, 3):
            results = [
                await sampler.sample(
                    prompt,
                    requirements=[max_words(WORDS)],
                    loop_budget=budget,
                    options=OPTIONS,
                    seed=2024,
                )
                for prompt in PROMPTS
            ]
            for result in results:
                check_consistent(result, budget, 1)
            successes[budget] = [r.success for r in results]

    assert sum(successes[3]) >= sum(successes[1])
    for small, large in zip(successes[1], successes[3], strict=True):
        assert large or not small  # a prompt won with one attempt is won with three


async def test_concurrent_subsamples_on_a_real_model(llama_server) -> None:
    async with OpenAIBackend("smollm2", base_url=f"{llama_server.base_url}/v1") as backend:
        result = await Sampler(backend, load_entrypoints=False).sample(
            PROMPTS[0],
            requirements=[max_words(WORDS)],
            loop_budget=2,
            concurrency_budget=3,
            options=OPTIONS,
            seed=7,
        )
    check_consistent(result, 2, 3)
    assert result.iterations_used + result.cancelled <= 6
