"""LLM-as-judge through the engine: a check's own model calls (``llm_judge``, or any check
calling ``CheckContext.generate``) fire the generation hooks with purpose "judge", are retried,
count in usage, see the prompt, and fail the check, not the call, when they fail for good."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hook_specs import HookName
from hook_specs.records import Generation, Usage
from sampling_core import GenerationRequest, Sampler, ScriptedBackend
from sampling_core.backends.transport import TransientBackendError
from sampling_core.requirements import llm_judge
from sampling_core.testing import HookRecorder
from tests.support.engine_helpers import BACKEND_CALLS, RETRY, events_of, fields_of, strict

pytestmark = pytest.mark.anyio


def judge_reply(request) -> str:
    prompt = request.prompt
    assert "The request was:\nName a colour." in prompt  # the judge sees the prompt
    return "YES, a colour" if "Answer to judge:\nblue" in prompt else "NO"


def calls_of(recorder: HookRecorder) -> list[tuple[str, str, int]]:
    """``(hook, purpose, retry)`` of every backend call's hook, in the order fired."""
    return [(hook, f["purpose"], f["retry"]) for hook, f in events_of(recorder, *BACKEND_CALLS)]


async def test_judge_calls_fire_the_generation_hooks_and_count_in_usage():
    seen = HookRecorder()
    model = ScriptedBackend(["table", "blue"])
    judge = ScriptedBackend(judge_reply)
    result = await strict(model, seen).sample(
        "Name a colour.", requirements=[llm_judge(judge, "Is it a colour?")], loop_budget=2
    )
    assert result.success and result.text == "blue"
    assert calls_of(seen) == [
        ("generation_pre_call", "sample", 0),
        ("generation_post_call", "sample", 0),
        ("generation_pre_call", "judge", 0),
        ("generation_post_call", "judge", 0),
        ("generation_pre_call", "sample", 0),
        ("generation_post_call", "sample", 0),
        ("generation_pre_call", "judge", 0),
        ("generation_post_call", "judge", 0),
    ]
    # usage counts the judge's tokens beside the attempts'
    tokens = {"sample": 0, "judge": 0}
    for post in fields_of(seen, HookName.GENERATION_POST_CALL):
        usage = post["generation"].usage
        tokens[post["purpose"]] += usage.input_tokens + usage.output_tokens
    assert tokens["judge"] > 0 and tokens["sample"] > 0
    total = result.usage.input_tokens + result.usage.output_tokens
    assert total == tokens["judge"] + tokens["sample"]
    assert result.cancelled == 0 and result.errors == []


def own_check(judge: ScriptedBackend) -> tuple[Any, str]:
    """A check that makes its own model call, and the prompt it sends."""

    async def judged(text, context):
        """a judge says yes"""
        request = GenerationRequest(
            [{"role": "user", "content": f"ok? {text}"}], {"max_tokens": 1}, context.iteration
        )
        verdict = await context.generate(request, backend=judge)
        return verdict.text == "yes"

    return judged, "ok? ok fine"


def builtin_judge(judge: ScriptedBackend) -> tuple[Any, str]:
    """``llm_judge``, and the prompt it sends."""
    prompt = (
        "ok?\n\nThe request was:\nq\n\nAnswer to judge:\nok fine\n\n"
        "Reply with YES or NO first, then one sentence saying why."
    )
    return llm_judge(judge, "ok?", options={"max_tokens": 1}), prompt


@pytest.mark.parametrize("make_check", [own_check, builtin_judge])
async def test_a_transient_judge_failure_is_retried_through_the_hooks(
    make_check: Callable[[ScriptedBackend], tuple[Any, str]],
):
    seen = HookRecorder()
    busy = TransientBackendError("busy")
    main = ScriptedBackend(["ok fine"])
    judge = ScriptedBackend(["yes"], failures={1: busy})
    check, prompt = make_check(judge)
    result = await strict(main, seen, retry=RETRY).sample(
        "q", requirements=[check], seed=5, options={"temperature": 0.2}
    )
    assert result.success and (main.calls, judge.calls) == (1, 2)
    assert calls_of(seen) == [
        ("generation_pre_call", "sample", 0),
        ("generation_post_call", "sample", 0),
        ("generation_pre_call", "judge", 0),
        ("generation_error", "judge", 0),
        ("generation_pre_call", "judge", 1),
        ("generation_post_call", "judge", 1),
    ]
    [error] = fields_of(seen, HookName.GENERATION_ERROR)
    assert (error["will_retry"], error["exception"]) == (True, busy)
    judge_call = fields_of(seen, HookName.GENERATION_PRE_CALL)[1]
    assert judge_call["messages"] == [{"role": "user", "content": prompt}]
    assert judge_call["options"] == {"max_tokens": 1}  # the check's own, no derived seed
    assert (judge_call["attempt"], judge_call["iteration"]) == (1, 1)
    # a judge call is no attempt of its own: nothing in flight, no error kept
    assert (result.cancelled, result.errors, result.iterations_used) == (0, [], 1)
    # the attempt's tokens ("q" in, "ok fine" out) and the judge's (its prompt in, "yes" out)
    assert result.usage == Usage(1 + len(prompt.split()), 2 + 1)


def answer_then_fail(request) -> Generation:
    if request.messages[-1]["content"] == "q":
        return Generation("answer", usage=Usage(2, 1, 0.5))
    raise ValueError("judge offline")


async def asks_the_samplers_backend(text, context):
    """a judge says yes"""
    request = GenerationRequest([{"role": "user", "content": text}], {}, context.iteration)
    await context.generate(request)
    return True


@pytest.mark.parametrize(
    "check",
    [
        llm_judge(ScriptedBackend(answer_then_fail), "Is it a good answer?"),  # its own backend
        llm_judge(None, "Is it a good answer?"),  # the sampler's backend
        asks_the_samplers_backend,
    ],
)
async def test_a_judge_that_fails_for_good_ends_the_attempt_as_an_error(check: Any):
    """Nothing was graded: the attempt is an error (kept in ``result.errors``), not a fail."""
    sampler = strict(ScriptedBackend(answer_then_fail))
    with pytest.raises(ValueError, match="judge offline"):  # no attempt completed
        await sampler.sample("q", requirements=[check])
    seen: list[Any] = []

    def judge_once(request) -> Generation:  # the first attempt's judge fails, the next passes
        if request.messages[-1]["content"] == "q":
            return Generation("answer", usage=Usage(2, 1, 0.5))
        seen.append(request)
        if len(seen) == 1:
            raise ValueError("judge offline")
        return Generation("YES, fine")

    result = await strict(ScriptedBackend(judge_once)).sample(
        "q", requirements=[llm_judge(None, "Good?")], concurrency_budget=2
    )
    [error] = result.errors
    assert "judge offline" in str(error.exception) and result.success
    assert (result.iterations_used, result.cancelled) == (1, 0)


async def test_the_sampler_backend_judges_when_none_is_given():
    def reply(request) -> str:
        if "Answer to judge" in request.prompt:
            return "YES"
        return "blue"

    sampler = Sampler(ScriptedBackend(reply), load_entrypoints=False)
    result = await sampler.sample("Name a colour.", requirements=[llm_judge(None, "Colour?")])
    assert result.success and result.usage.output_tokens == 2  # "blue", then "YES"
