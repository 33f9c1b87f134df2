"""Strategies: repair messages, bounded context, picks, whole-budget strategies, seeds, format."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from hook_specs import Attempt, Generation, ValidationResult
from sampling_core import (
    BestOfN,
    GenerationRequest,
    MajorityVote,
    MultiTurn,
    RejectionSampling,
    RepairTemplate,
    Requirement,
    Sampler,
    ScriptedBackend,
)
from sampling_core.engine.seeds import derive_seed
from sampling_core.requirements.checks import contains, max_words

pytestmark = pytest.mark.anyio


def sampler(backend) -> Sampler:
    return Sampler(backend, load_entrypoints=False)


def never(text: str) -> ValidationResult:
    """must say the magic word"""
    return ValidationResult(False, f"{text!r} lacks the magic word")


async def test_rejection_sampling_resends_the_same_prompt():
    backend = ScriptedBackend(["a", "b", "c"])
    await sampler(backend).sample("q", requirements=[never], loop_budget=3)
    assert [r.messages for r in backend.requests] == [[{"role": "user", "content": "q"}]] * 3


async def test_repair_template_appends_reasons_of_the_last_k_failures():
    backend = ScriptedBackend(["a", "b", "c", "d"])
    await sampler(backend).sample(
        "q", requirements=[never], loop_budget=4, strategy=RepairTemplate(keep_failures=2)
    )
    last = backend.requests[-1].messages
    assert len(last) == 1 and last[0]["content"].startswith("q\n\n")
    content = last[0]["content"]
    assert "'b' lacks the magic word" in content and "'c' lacks the magic word" in content
    assert "'a' lacks" not in content  # only the last 2 failures are kept


async def test_repair_template_uses_the_description_when_a_check_gives_no_reason():
    backend = ScriptedBackend(["a", "b"])
    silent = Requirement("mentions the sea", lambda text: False)
    await sampler(backend).sample(
        "q", requirements=[silent], loop_budget=2, strategy=RepairTemplate()
    )
    assert "- mentions the sea" in backend.requests[1].messages[0]["content"]


async def test_multi_turn_continues_the_conversation_with_bounded_history():
    backend = ScriptedBackend(["a", "b", "c", "d"])
    result = await sampler(backend).sample(
        [{"role": "system", "content": "sys"}, {"role": "user", "content": "q"}],
        requirements=[never],
        loop_budget=4,
        strategy=MultiTurn(keep_failures=2),
    )
    second = backend.requests[1].messages
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[2]["content"] == "a" and "'a' lacks the magic word" in second[3]["content"]
    last = backend.requests[3].messages
    assert [m["content"] for m in last if m["role"] == "assistant"] == ["b", "c"]
    # nothing passed: the deepest turn is picked
    assert result.picked.attempt == 4 and result.text == "d"


async def test_best_of_n_runs_every_subsample_and_picks_the_best_score():
    def reply(request: GenerationRequest) -> str:
        return {0: "one two three four five six", 1: "one two three", 2: "one two three four"}[
            request.iteration.subsample_index
        ]

    backend = ScriptedBackend(reply)
    result = await sampler(backend).sample(
        "q", requirements=[max_words(2)], strategy=BestOfN(), loop_budget=2, concurrency_budget=3
    )
    assert backend.calls == 6 and result.cancelled == 0
    assert result.text == "one two three" and not result.success


async def test_best_of_n_stops_a_subsample_once_it_passes_but_runs_the_others():
    def reply(request: GenerationRequest) -> str:
        return "yes" if request.iteration.subsample_index == 0 else "no"

    backend = ScriptedBackend(reply)
    result = await sampler(backend).sample(
        "q", requirements=[contains("yes")], strategy=BestOfN(), loop_budget=3, concurrency_budget=2
    )
    assert result.success and result.text == "yes"
    assert backend.calls == 1 + 3


async def test_majority_vote_picks_the_most_common_normalised_answer():
    answers = ["Paris.", "Lyon", " paris", "PARIS!", "Lyon"]
    backend = ScriptedBackend(lambda r: answers[r.iteration.subsample_index])
    result = await sampler(backend).sample("q", strategy=MajorityVote(), concurrency_budget=5)
    assert result.success and result.text == "Paris."
    assert result.picked.subsample_index == 0


def _attempt(index: int, number: int, passed: bool, score: float | None = None) -> Attempt:
    checks = (ValidationResult(passed, score=score),)
    return Attempt(index, number, index * 3 + number, 1, "t", Generation("t"), checks, passed)


def test_picks_when_nothing_passed_are_deterministic():
    attempts = [_attempt(0, 1, False, 0.2), _attempt(0, 2, False, 0.5), _attempt(1, 1, False, 0.5)]
    assert RejectionSampling().pick(attempts) is attempts[1]  # best score, ties: the first
    assert RepairTemplate().pick(attempts) is attempts[1]
    assert MultiTurn().pick(attempts) is attempts[1]  # deepest turn
    assert BestOfN().pick(attempts) is attempts[1]
    deep = [_attempt(0, 2, False), _attempt(1, 2, False), _attempt(1, 1, False)]
    assert MultiTurn().pick(deep) is deep[0]  # ties: lowest subsample


def test_keep_failures_must_be_a_positive_int():
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="keep_failures"):
            RepairTemplate(keep_failures=bad)


async def test_seeds_are_distinct_per_attempt_and_reproducible():
    seen = []
    for _ in range(2):
        backend = ScriptedBackend(["x"])
        await sampler(backend).sample(
            "q", requirements=[never], loop_budget=3, concurrency_budget=3, seed=42
        )
        seen.append(
            {
                (r.iteration.subsample_index, r.iteration.attempt): r.options["seed"]
                for r in backend.requests
            }
        )
    assert seen[0] == seen[1]
    assert len(set(seen[0].values())) == 9
    assert seen[0][(1, 2)] == derive_seed(42, 1, 2)
    assert derive_seed(43, 1, 2) != derive_seed(42, 1, 2)


async def test_no_seed_option_without_a_seed():
    backend = ScriptedBackend(["x"])
    await sampler(backend).sample("q", options={"temperature": 0.5})
    assert backend.requests[0].options == {"temperature": 0.5}


class City(BaseModel):
    name: str
    population: int


async def test_format_parses_the_answer_and_repairs_bad_json():
    backend = ScriptedBackend(
        ['{"name": "Oslo"}', '```json\n{"name": "Oslo", "population": 700000}\n```']
    )
    result = await sampler(backend).sample(
        "q", format=City, loop_budget=2, strategy=RepairTemplate()
    )
    assert result.success and result.value == City(name="Oslo", population=700000)
    assert "population" in backend.requests[1].messages[0]["content"]


async def test_prompt_validation():
    s = sampler(ScriptedBackend(["x"]))
    with pytest.raises(ValueError, match="needs 'role' and 'content'"):
        await s.sample([{"content": "no role"}])
    with pytest.raises(ValueError, match='"first" or "ordered"'):
        await s.sample("q", selection="fastest")
    with pytest.raises(TypeError, match="Strategy"):
        await s.sample("q", strategy="RejectionSampling")


async def test_sample_sync_refuses_to_run_inside_an_event_loop():
    with pytest.raises(RuntimeError, match="inside a running"):
        sampler(ScriptedBackend(["x"])).sample_sync("q")


def test_module_level_sample_has_the_documented_signature():
    import inspect

    from sampling_core import sample, sample_sync

    expected = [
        "prompt",
        "backend",
        "requirements",
        "strategy",
        "loop_budget",
        "concurrency_budget",
        "plugins",
        "seed",
        "selection",
        "options",
        "format",
        "early_exit",  # early_exit=False runs every subsample (pass@k)
        "early_stop",  # spending fewer tokens
        "launch",
        "stagger_s",
        "ask_again",  # the response cache answers none of the call's requests (a retry asks)
    ]
    for function in (sample, sample_sync):
        parameters = inspect.signature(function).parameters
        assert list(parameters) == expected
        assert parameters["ask_again"].default is False
        assert parameters["early_stop"].default is True
        assert parameters["launch"].default == "all"
        assert parameters["selection"].default == "first"
        assert parameters["loop_budget"].default == parameters["concurrency_budget"].default == 1


def test_module_level_sample_sync_passes_every_argument_on(monkeypatch):
    monkeypatch.setenv("SAMPLEHOOKS_PLUGINS", "")  # the default sampler: no entry points
    from sampling_core import sample_sync

    backend = ScriptedBackend(['{"name": "Oslo"}', '{"name": "Oslo", "population": 7}'])
    result = sample_sync(
        "q",
        backend=backend,
        requirements=[contains("Oslo")],
        strategy=RepairTemplate(),
        loop_budget=2,
        concurrency_budget=1,
        seed=7,
        selection="ordered",
        options={"max_tokens": 9},
        format=City,
    )
    assert result.value == City(name="Oslo", population=7)
    assert result.strategy_name == "RepairTemplate" and result.iterations_used == 2
    assert backend.requests[1].options == {"max_tokens": 9, "seed": derive_seed(7, 0, 2)}
