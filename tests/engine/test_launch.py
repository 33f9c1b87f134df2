"""Launch policies start exactly the subsamples they should; cancelled and never-started
subsamples are counted apart; the spend of attempts cancelled in flight is counted."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from builtin_plugins.budget_guard import BudgetGuard, Totals
from hook_specs import GenerationChunkPayload, HookName, Usage, hookimpl
from sampling_core import Generation, GenerationRequest, Sampler, ScriptedBackend
from sampling_core.backends.base import Chunk
from sampling_core.requirements.checks import contains

pytestmark = pytest.mark.anyio

GOOD = [contains("good")]


def where(request: GenerationRequest) -> tuple[int, int]:
    info = request.iteration
    assert info is not None
    return info.subsample_index, info.attempt


def sampler(backend: Any, *plugins: Any) -> Sampler:
    return Sampler(backend, plugins=list(plugins), load_entrypoints=False)


async def test_all_starts_every_subsample_at_once() -> None:
    backend = ScriptedBackend(["bad"])
    result = await sampler(backend).sample("q", requirements=GOOD, concurrency_budget=4)
    assert backend.calls == 4 and result.not_started == 0


async def test_staggered_starts_nothing_more_once_the_call_is_decided(hook_recorder: Any) -> None:
    backend = ScriptedBackend(["good"])
    result = await sampler(backend, hook_recorder).sample(
        "q", requirements=GOOD, concurrency_budget=4, launch="staggered", stagger_s=3600
    )
    # the first subsample passed at once: the three others never started (nor waited an hour)
    assert result.success and backend.calls == 1
    assert result.not_started == 3 and result.cancelled == 0
    (end,) = hook_recorder.payloads(HookName.SAMPLING_LOOP_END)
    assert end.not_started == 3


class FakeClock:
    """Stands for the launcher's sleep: each wait is kept until the test lets it end."""

    def __init__(self) -> None:
        self.waits: dict[float, anyio.Event] = {}
        self.changed = anyio.Event()

    async def sleep(self, seconds: float) -> None:
        self.waits[seconds] = anyio.Event()
        self.changed.set()
        await self.waits[seconds].wait()

    async def until(self, count: int) -> None:
        while len(self.waits) < count:
            self.changed = anyio.Event()
            await self.changed.wait()


async def test_staggered_starts_subsample_i_after_i_staggers_unless_decided(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sampling_core.engine import launch

    clock = FakeClock()
    monkeypatch.setattr(launch, "sleep", clock.sleep)
    started: list[int] = []
    went = anyio.Event()

    async def reply(request: GenerationRequest) -> str:
        started.append(where(request)[0])
        went.set()
        return "good" if where(request)[0] == 2 else "bad"

    backend = ScriptedBackend(reply)
    results = []

    async def call() -> None:
        results.append(
            await sampler(backend).sample(
                "q", requirements=GOOD, concurrency_budget=4, launch="staggered", stagger_s=0.5
            )
        )

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        await clock.until(3)  # subsamples 1, 2, 3 wait 1, 2 and 3 staggers
        assert sorted(clock.waits) == [0.5, 1.0, 1.5] and started == [0]
        for seconds, index in ((0.5, 1), (1.0, 2)):  # time passes: their turns come
            went = anyio.Event()
            clock.waits[seconds].set()
            await went.wait()
            assert started[-1] == index
    # subsample 2 passed: subsample 3, still waiting its turn, never started
    (result,) = results
    assert result.success and started == [0, 1, 2] and backend.calls == 3
    assert result.not_started == 1


async def test_on_failure_starts_the_next_subsample_when_one_fails() -> None:
    second_try = anyio.Event()

    async def reply(request: GenerationRequest) -> str:
        index, attempt = where(request)
        if (index, attempt) == (0, 2):
            second_try.set()
            await anyio.sleep_forever()  # runs until the call is decided and cancels it
        if index == 1:
            await second_try.wait()  # passes once 0.2 is in flight
            return "good"
        return "bad"

    backend = ScriptedBackend(reply)
    result = await sampler(backend).sample(
        "q", requirements=GOOD, loop_budget=2, concurrency_budget=4, launch="on_failure"
    )
    # 0.1 failed: 1 started (and 0 went on to 0.2); 1.1 passed: 2 and 3 never started
    assert result.success and result.text == "good"
    assert sorted(where(r) for r in backend.requests) == [(0, 1), (0, 2), (1, 1)]
    assert backend.calls == 3
    assert result.not_started == 2 and result.cancelled == 1


async def test_on_failure_runs_every_subsample_when_none_passes() -> None:
    backend = ScriptedBackend(["bad"])
    result = await sampler(backend).sample(
        "q", requirements=GOOD, loop_budget=2, concurrency_budget=3, launch="on_failure"
    )
    assert backend.calls == 6 and result.iterations_used == 6 and result.not_started == 0


async def test_on_failure_starts_the_next_when_one_ends_by_a_backend_error() -> None:
    async def reply(request: GenerationRequest) -> str:
        if where(request)[0] == 0:
            raise RuntimeError("down")
        return "good"

    backend = ScriptedBackend(reply)
    result = await sampler(backend).sample(
        "q", requirements=GOOD, concurrency_budget=3, launch="on_failure"
    )
    assert result.success and backend.calls == 2 and result.not_started == 1
    assert len(result.errors) == 1


async def test_a_bad_launch_policy_is_refused() -> None:
    s = sampler(ScriptedBackend(["x"]))
    with pytest.raises(ValueError, match="launch must be one of 'all', 'staggered'"):
        await s.sample("q", launch="later")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="stagger_s must be a number of seconds from 0 to 3600"):
        await s.sample("q", launch="staggered", stagger_s=-1)


# -- what attempts cancelled in flight spent ------------------------------------------------


async def test_a_cancelled_call_that_did_not_stream_counts_as_unknown_never_zero() -> None:
    sibling_started = anyio.Event()

    async def reply(request: GenerationRequest) -> str:
        if where(request)[0] == 1:
            sibling_started.set()
            await anyio.sleep_forever()
        await sibling_started.wait()
        return "good"

    result = await sampler(ScriptedBackend(reply)).sample(
        "q", requirements=GOOD, concurrency_budget=2
    )
    assert result.success and result.cancelled == 1
    assert result.cancelled_usage == Usage(None, None, None)
    assert result.usage.input_tokens is None and result.usage.output_tokens is None
    assert result.attempts[0].generation.usage == Usage(1, 1)  # the completed one, as it was


class Streams:
    """Subsample 0 answers "good" after its siblings streamed three chunks each; they never
    end. Chunks carry the server's count when ``counted``."""

    def __init__(self, counted: bool) -> None:
        self.counted = counted
        self.streamed = 0
        self.three_each = anyio.Event()

    async def generate(self, request: GenerationRequest) -> str:
        raise AssertionError("streamed only")

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Any]:
        if where(request)[0] == 0:
            await self.three_each.wait()
            yield Chunk("good", Usage(4, 1) if self.counted else None)
            yield Generation("good", Usage(4, 1, 0.0))
            return
        for i in range(3):
            yield Chunk(f" w{i}", Usage(4, i + 1) if self.counted else None)
            self.streamed += 1
            if self.streamed == 6:
                self.three_each.set()
        await anyio.sleep_forever()
        yield Generation("never")


class Listens:
    @hookimpl
    def generation_chunk(self, payload: GenerationChunkPayload) -> None:
        """Someone needs the chunks: the backend streams."""


async def test_a_cancelled_stream_counts_the_tokens_that_arrived() -> None:
    for counted, expected in [(True, Usage(8, 6, None)), (False, Usage(None, 6, None))]:
        result = await sampler(Streams(counted), Listens()).sample(
            "q", requirements=GOOD, concurrency_budget=3
        )
        assert result.success and result.cancelled == 2
        assert result.cancelled_usage == expected
        assert result.usage.output_tokens == 1 + 6


async def test_a_free_backend_prices_what_was_cut_short_at_zero() -> None:
    backend = Streams(True)
    backend.free_of_charge = True  # type: ignore[attr-defined]
    result = await sampler(backend, Listens()).sample("q", requirements=GOOD, concurrency_budget=3)
    assert result.cancelled_usage == Usage(8, 6, 0.0) and result.usage.cost_usd == 0.0


async def test_budget_guard_counts_cancelled_tokens_and_fails_closed_when_unknown() -> None:
    totals = Totals()
    guard = BudgetGuard(max_tokens_total=1000, totals=totals)
    await sampler(Streams(True), guard).sample("q", requirements=GOOD, concurrency_budget=3)
    assert totals.tokens == (4 + 1) + (8 + 6)  # the cut-short ones too
    assert totals.unknown_tokens is None
    totals.reset()  # the cut-short streams' cost was unknown (they are not free)

    sibling_started = anyio.Event()

    class NoStream:  # cancelled without streaming: its spend is unknown
        async def generate(self, request: GenerationRequest) -> Generation:
            if where(request)[0] == 1:
                sibling_started.set()
                await anyio.sleep_forever()
            await sibling_started.wait()
            return Generation("good", Usage(1, 1, 0.0))  # this one reports its usage

    s = sampler(NoStream(), guard)
    first = await s.sample("q", requirements=GOOD, concurrency_budget=2)
    assert first.success and totals.unknown_tokens is not None
    assert "cancelled in flight did not report its tokens" in totals.unknown_tokens
    refused = await s.sample("q", requirements=GOOD)
    assert refused.stop_reason == "stopped_by_plugin" and refused.attempts == []


async def test_budget_guard_stops_a_stream_that_crosses_a_ceiling() -> None:
    guard = BudgetGuard(max_tokens_per_call=4, totals=Totals())
    backend = ScriptedBackend([" ".join(["w"] * 50)])
    result = await sampler(backend, guard).sample("q")
    assert result.stop_reason == "stopped_by_plugin" and backend.streams_closed_early == 1
    assert backend.chunks_sent == 5  # the fifth streamed token crossed the ceiling


async def test_a_chunk_without_text_only_reports_what_the_server_counted() -> None:
    class ReadsThePrompt:
        """Subsample 1 reports its prompt read, then never generates; subsample 0 passes."""

        def __init__(self) -> None:
            self.prompt_read = anyio.Event()

        async def generate(self, request: GenerationRequest) -> str:
            raise AssertionError("streamed only")

        async def stream(self, request: GenerationRequest) -> AsyncIterator[Any]:
            if where(request)[0] == 1:
                yield Chunk("", Usage(9, 0))  # the server has read the prompt: 9 tokens
                self.prompt_read.set()
                await anyio.sleep_forever()
            await self.prompt_read.wait()
            yield Chunk("good", Usage(9, 1))
            yield Generation("good", Usage(9, 1, 0.0))

    chunks: list[str] = []

    class Deltas:
        @hookimpl
        def generation_chunk(self, payload: GenerationChunkPayload) -> None:
            chunks.append(payload.delta)

    result = await sampler(ReadsThePrompt(), Deltas()).sample(
        "q", requirements=GOOD, concurrency_budget=2
    )
    assert result.success and result.cancelled == 1
    assert result.cancelled_usage == Usage(9, 0, None)  # known, though no text arrived
    assert chunks == ["good"]  # the empty chunk reached no plugin
