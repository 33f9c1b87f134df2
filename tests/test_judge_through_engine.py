"""LLM-as-judge through the engine: hooks see purpose "judge", retries, usage, the prompt."""

from __future__ import annotations

import pytest

from hook_specs import HookName, hookimpl
from sampling_core import Sampler, ScriptedBackend, TransientBackendError
from sampling_core.requirements import llm_judge
from sampling_core.testing import make_scripted_backend
from sampling_core.transport import RetryPolicy

pytestmark = pytest.mark.anyio


class Purposes:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int]] = []
        self.tokens: dict[str, int] = {"sample": 0, "judge": 0}

    @hookimpl
    def generation_pre_call(self, payload):
        self.seen.append(("pre", payload.purpose, payload.retry))

    @hookimpl
    def generation_post_call(self, payload):
        self.seen.append(("post", payload.purpose, payload.retry))
        usage = payload.generation.usage
        self.tokens[payload.purpose] += usage.input_tokens + usage.output_tokens

    @hookimpl
    def generation_error(self, payload):
        self.seen.append(("error", payload.purpose, payload.retry))


def judge_reply(request) -> str:
    prompt = request.prompt
    assert "The request was:\nName a colour." in prompt  # the judge sees the prompt
    return "YES, a colour" if "Answer to judge:\nblue" in prompt else "NO"


async def test_judge_calls_fire_the_generation_hooks_and_count_in_usage():
    purposes = Purposes()
    model = ScriptedBackend(["table", "blue"])
    judge = ScriptedBackend(judge_reply)
    sampler = Sampler(model, plugins=[purposes], load_entrypoints=False)
    result = await sampler.sample(
        "Name a colour.", requirements=[llm_judge(judge, "Is it a colour?")], loop_budget=2
    )
    assert result.success and result.text == "blue"
    assert purposes.seen == [
        ("pre", "sample", 0),
        ("post", "sample", 0),
        ("pre", "judge", 0),
        ("post", "judge", 0),
        ("pre", "sample", 0),
        ("post", "sample", 0),
        ("pre", "judge", 0),
        ("post", "judge", 0),
    ]
    # usage counts the judge's tokens beside the attempts'
    assert purposes.tokens["judge"] > 0 and purposes.tokens["sample"] > 0
    total = result.usage.input_tokens + result.usage.output_tokens
    assert total == purposes.tokens["judge"] + purposes.tokens["sample"]
    assert result.cancelled == 0 and result.errors == []


async def test_a_transient_judge_failure_is_retried(hook_recorder):
    purposes = Purposes()
    judge = make_scripted_backend(judge_reply, failures={1: TransientBackendError("429")})
    sampler = Sampler(
        ScriptedBackend(["blue"]),
        plugins=[purposes, hook_recorder],
        load_entrypoints=False,
        retry=RetryPolicy(max_retries=1, base_delay=0.001),
    )
    result = await sampler.sample("Name a colour.", requirements=[llm_judge(judge, "Colour?")])
    assert result.success
    assert ("error", "judge", 0) in purposes.seen and ("post", "judge", 1) in purposes.seen
    errors = hook_recorder.payloads(HookName.GENERATION_ERROR)
    assert [e.will_retry for e in errors] == [True] and errors[0].purpose == "judge"


async def test_a_judge_that_fails_for_good_fails_the_check_not_the_call():
    judge = make_scripted_backend(judge_reply, failures={1: RuntimeError("judge down")})
    sampler = Sampler(ScriptedBackend(["blue"]), load_entrypoints=False)
    result = await sampler.sample("Name a colour.", requirements=[llm_judge(judge, "Colour?")])
    assert not result.success and result.errors == []
    (verdict,) = result.attempts[0].validations
    assert not verdict.passed and "judge down" in (verdict.reason or "")


async def test_the_sampler_backend_judges_when_none_is_given():
    def reply(request) -> str:
        if "Answer to judge" in request.prompt:
            return "YES"
        return "blue"

    sampler = Sampler(ScriptedBackend(reply), load_entrypoints=False)
    result = await sampler.sample("Name a colour.", requirements=[llm_judge(None, "Colour?")])
    assert result.success and result.usage.output_tokens == 2  # "blue", then "YES"
