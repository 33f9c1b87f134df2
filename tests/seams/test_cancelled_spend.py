"""What a backend call spent counts when the attempt is cancelled after the backend
answered but before the call returned (a ``generation_call`` wrapper still at work after
its ``yield``: the cache storing the answer, a span being closed): never 0, never lost."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import anyio
import pytest

from hook_specs import hookimpl
from sampling_core import Sampler, ScriptedBackend
from sampling_core.requirements import contains, max_words

pytestmark = pytest.mark.anyio


class SlowAfterTheAnswer:
    """Subsample 0's wrapper is still at work after its answer came when subsample 1 (which
    waits for that answer) passes and cancels it."""

    def __init__(self) -> None:
        self.answered = anyio.Event()
        self.cancelled: list[Any] = []

    @hookimpl(wrapper=True)
    async def generation_call(self, payload: Any) -> AsyncGenerator[None, Any]:
        if payload.subsample_index == 1:
            await self.answered.wait()
        outcome = yield
        if payload.subsample_index == 0:
            self.answered.set()
            await anyio.sleep_forever()  # cancelled by the sibling's pass
        del outcome

    @hookimpl
    def generation_cancelled(self, payload: Any) -> None:
        self.cancelled.append(payload)


@pytest.mark.parametrize("streams", [True, False])
async def test_a_call_cancelled_after_its_answer_counts_what_it_spent(streams: bool) -> None:
    backend = ScriptedBackend(lambda r: ["no no no", "yes"][r.iteration.subsample_index])
    watcher = SlowAfterTheAnswer()
    checks: list[Any] = [contains("yes")]
    if streams:
        checks.append(max_words(10))  # a prefix check: the backend streams
    result = await Sampler(backend, plugins=[watcher], load_entrypoints=False).sample(
        "q", requirements=checks, concurrency_budget=2
    )
    assert result.text == "yes" and result.cancelled == 1
    assert backend.chunks_sent == (4 if streams else 0)
    # the cancelled call's answer was whole: 1 input and 3 output tokens (the scripted
    # backend counts words), besides the winner's 1 and 1
    assert (result.usage.input_tokens, result.usage.output_tokens) == (2, 4)
    assert result.cancelled_usage.output_tokens == 3
    (cancelled,) = watcher.cancelled
    assert cancelled.reason == "sibling_succeeded" and cancelled.text == "no no no"
    assert cancelled.usage.output_tokens == 3
