"""A streamed answer a plugin (or the cache) gave instead of the backend spends nothing,
while it streams and when it is cancelled midway: no backend call was made. Its chunks do
not count toward ``budget_guard``'s token ceilings, and a cancelled one adds no token to
the call's usage, its ``cancelled_usage``, the guard's totals, ``generation_cancelled``'s
``usage``, tracing or OpenTelemetry's metrics (``Generation.spent`` says so for whole
answers; these are the streamed ones)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import pytest
from structlog.testing import capture_logs

from builtin_plugins.budget_guard import BudgetGuard, Totals
from builtin_plugins.otel import OtelPlugin
from builtin_plugins.tracing import TracingPlugin
from hook_specs import Generation, StopSampling, Usage, hookimpl
from hook_specs.records import UNKNOWN_USAGE, spending
from sampling_core import RetryPolicy, Sampler, ScriptedBackend, TransientBackendError
from sampling_core.backends.base import Chunk
from sampling_core.requirements import contains
from tests.support.otel_helpers import metrics_by_name

pytestmark = pytest.mark.anyio

NOTHING = Usage(0, 0, 0.0)


class Replay:
    """Answers every call itself with one chunk a word (as a replay of a streamed answer
    does), saying nothing of tokens; listens to the chunks (so calls stream)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.chunks = 0

    @hookimpl
    def generation_call(self, payload: Any) -> Any:
        assert payload.streamed

        def pieces() -> Any:
            for word in self.text.split():
                yield Chunk(word + " ")
            yield Generation(self.text)

        return pieces()

    @hookimpl
    def generation_chunk(self, payload: Any) -> None:
        self.chunks += 1


@pytest.mark.parametrize("ceiling", ["max_tokens_per_call", "max_tokens_total"])
async def test_a_plugins_chunks_do_not_count_toward_the_token_ceilings(ceiling: str) -> None:
    totals = Totals()
    guard = BudgetGuard(**{ceiling: 3}, totals=totals)
    replay = Replay("one two three four five six seven end")
    sampler = Sampler(ScriptedBackend(["never"]), plugins=[replay, guard], load_entrypoints=False)
    result = await sampler.sample("q", requirements=[contains("end")])
    assert replay.chunks == 8
    assert result.success, result.failure_reason  # not stopped by the guard midway
    assert result.usage == NOTHING
    assert (totals.started, totals.tokens, totals.unknown_tokens) == (0, 0, None)
    again = await sampler.sample("q", requirements=[contains("end")])  # nothing was spent
    assert again.success, again.failure_reason


class HalfReplayed:
    """Subsample 0 is answered by this plugin: two chunks, then it hangs until cancelled.
    Subsample 1 (when there is one) is asked of the backend once they arrived."""

    def __init__(self) -> None:
        self.streamed_two = anyio.Event()
        self.cancelled: list[Any] = []

    @hookimpl
    async def generation_call(self, payload: Any) -> Any:
        if payload.subsample_index == 1:
            await self.streamed_two.wait()
            return None  # the backend answers

        async def pieces() -> AsyncIterator[Any]:
            yield Chunk("one ")
            yield Chunk("two ")
            self.streamed_two.set()
            await anyio.sleep_forever()
            yield Generation("never")  # pragma: no cover

        return pieces()

    @hookimpl
    def generation_chunk(self, payload: Any) -> None:
        """Listening to chunks makes the calls stream."""

    @hookimpl
    def generation_cancelled(self, payload: Any) -> None:
        self.cancelled.append(payload)


async def cut_midway(how: str, *plugins: Any) -> tuple[HalfReplayed, Any]:
    """A call whose subsample 0 (a plugin's streamed answer) is cancelled after two chunks:
    by its sibling's pass (the backend's "yes": 1 input and 1 output token), or by its
    caller (no result then)."""
    replayed = HalfReplayed()
    sampler = Sampler(
        ScriptedBackend(["yes"]), plugins=[replayed, *plugins], load_entrypoints=False
    )
    result = None
    with anyio.fail_after(10):
        if how == "sibling_succeeded":
            result = await sampler.sample("q", requirements=[contains("yes")], concurrency_budget=2)
        else:
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: sampler.sample("q", requirements=[contains("yes")]))
                await replayed.streamed_two.wait()
                group.cancel_scope.cancel()
    return replayed, result


HOW = ["sibling_succeeded", "caller_cancelled"]


@pytest.mark.parametrize("how", HOW)
async def test_a_cancelled_plugin_stream_spends_nothing(how: str) -> None:
    totals = Totals()
    guard = BudgetGuard(max_tokens_total=100, max_generations_total=2, totals=totals)
    replayed, result = await cut_midway(how, guard)
    backend_calls = 1 if how == "sibling_succeeded" else 0
    if result is not None:
        assert result.success and result.cancelled == 1
        assert result.usage.input_tokens == result.usage.output_tokens == 1  # the backend's
        assert result.cancelled_usage.total_tokens == 0
    assert totals.unknown_tokens is None  # a token ceiling still holds
    # the guard counts the backend's call alone: the replay's place is given back
    assert (totals.tokens, totals.started) == (2 * backend_calls, backend_calls)
    (cancelled,) = replayed.cancelled
    assert (cancelled.reason, cancelled.text) == (how, "one two ")
    assert cancelled.usage == NOTHING  # what it spent: no backend call
    assert cancelled.answered_by == "HalfReplayed"


@pytest.mark.parametrize("how", HOW)
async def test_tracing_says_a_cancelled_plugin_stream_spent_nothing(how: str) -> None:
    with capture_logs() as logs:
        await cut_midway(how, TracingPlugin())
    (event,) = [e for e in logs if e["event"] == "generation.cancelled"]
    (end,) = [e for e in logs if e["event"] == "sampling.loop.end"]
    spent = 1 if how == "sibling_succeeded" else 0
    assert (end["input_tokens"], end["output_tokens"]) == (spent, spent)
    assert event["output_tokens"] == 0
    assert event.get("answered_by") == "HalfReplayed"


async def test_opentelemetry_measures_no_cancelled_plugin_stream(provider: Any) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    plugin = OtelPlugin(tracer_provider=provider, meter_provider=MeterProvider([reader]))
    await cut_midway("sibling_succeeded", plugin)
    found = metrics_by_name(reader)
    (calls,) = found["gen_ai.client.operation.duration"].data.data_points
    assert calls.count == 1  # the backend's call; the replay's cancelled answer is none


class SlowLookup:
    """Subsample 0's call is looked up by this plugin (as the cache does) until cancelled;
    subsample 1 is asked of the backend once the lookup began."""

    def __init__(self) -> None:
        self.looking = anyio.Event()
        self.cancelled: list[Any] = []

    @hookimpl
    async def generation_call(self, payload: Any) -> None:
        if payload.subsample_index == 1:
            await self.looking.wait()
            return
        self.looking.set()
        await anyio.sleep_forever()

    @hookimpl
    def generation_cancelled(self, payload: Any) -> None:
        self.cancelled.append(payload)


class StreamedSlowLookup(SlowLookup):
    @hookimpl
    def generation_chunk(self, payload: Any) -> None:
        """Listening to chunks makes the calls stream."""


@pytest.mark.parametrize("kind", [SlowLookup, StreamedSlowLookup])
async def test_a_call_cancelled_before_its_backend_call_began_spent_nothing(kind: type) -> None:
    """The backend was never asked (a plugin was still looking the answer up), so what the
    call spent is known: nothing, not unknown (streamed or not)."""
    lookup, totals = kind(), Totals()
    guard = BudgetGuard(max_generations_total=2, totals=totals)
    sampler = Sampler(ScriptedBackend(["yes"]), plugins=[lookup, guard], load_entrypoints=False)
    with anyio.fail_after(10):
        result = await sampler.sample("q", requirements=[contains("yes")], concurrency_budget=2)
    assert result.success and result.cancelled == 1
    assert result.usage.input_tokens == result.usage.output_tokens == 1  # the backend's
    assert result.cancelled_usage.total_tokens == 0
    (cancelled,) = lookup.cancelled
    assert cancelled.usage == NOTHING and not cancelled.backend_called
    assert cancelled.answered_by is None  # which would have answered is not known
    assert (totals.started, totals.generations) == (1, 1)  # its place is given back


def first_hangs() -> Callable[[Any], Awaitable[str]]:
    """A backend's replies: subsample 0's call hangs until it is cancelled; the others
    answer "yes" once it began (made inside a test: its event is the running loop's)."""
    began = anyio.Event()

    async def reply(request: Any) -> str:
        if request.iteration.subsample_index == 0:
            began.set()
            await anyio.sleep_forever()
        await began.wait()
        return "yes"

    return reply


async def test_a_backend_call_cancelled_in_flight_keeps_its_place() -> None:
    cancelled: list[Any] = []

    class Watch:
        @hookimpl
        def generation_cancelled(self, payload: Any) -> None:
            cancelled.append(payload)

    totals = Totals()
    guard = BudgetGuard(max_generations_total=5, totals=totals)
    sampler = Sampler(
        ScriptedBackend(first_hangs()), plugins=[Watch(), guard], load_entrypoints=False
    )
    with anyio.fail_after(10):
        result = await sampler.sample("q", requirements=[contains("yes")], concurrency_budget=2)
    assert result.success and result.cancelled == 1
    (payload,) = cancelled
    assert payload.backend_called and payload.answered_by is None
    assert payload.usage.input_tokens is None  # a backend call: not known, never nothing
    assert totals.started == 2  # a backend call was made


class PassThrough:
    """A ``generation_call`` wrapper that passes every call on to the backend, and records
    the calls cancelled (it listens to no chunk: the calls are not streamed)."""

    def __init__(self) -> None:
        self.cancelled: list[Any] = []

    @hookimpl(wrapper=True)
    def generation_call(self, payload: Any) -> Any:
        return (yield)

    @hookimpl
    def generation_cancelled(self, payload: Any) -> None:
        self.cancelled.append(payload)


async def test_a_backend_call_cancelled_under_a_wrapper_spent_what_is_unknown() -> None:
    """A wrapper passed the call on and the backend was working on it (not streamed): the
    backend was asked, so what the call spent is unknown, never nothing."""

    wrapper = PassThrough()
    sampler = Sampler(ScriptedBackend(first_hangs()), plugins=[wrapper], load_entrypoints=False)
    with anyio.fail_after(10):
        result = await sampler.sample("q", requirements=[contains("yes")], concurrency_budget=2)
    assert result.success and result.cancelled == 1
    (payload,) = wrapper.cancelled
    assert payload.backend_called and payload.answered_by is None
    assert payload.usage.input_tokens is None
    assert result.cancelled_usage.input_tokens is None and result.usage.input_tokens is None


async def test_a_backend_call_that_raised_under_a_wrapper_leaves_the_usage_known() -> None:
    """A backend call under a wrapper that raised (a transient error, then retried) spent
    nothing that is unknown: the call's usage is its retry's, known."""
    failed: list[int] = []

    def reply(request: Any) -> str:
        if not failed:
            failed.append(1)
            raise TransientBackendError("busy")
        return "yes"

    sampler = Sampler(
        ScriptedBackend(reply),
        plugins=[PassThrough()],
        load_entrypoints=False,
        retry=RetryPolicy(base_delay=0.0, jitter=0.0),
    )
    result = await sampler.sample("q", requirements=[contains("yes")])
    assert result.success and failed == [1]
    assert result.usage.input_tokens == result.usage.output_tokens == 1


class RefuseAfterTheGuard:
    """Refuses the first backend call in ``generation_pre_call``, after ``budget_guard``
    counted it (both ``trylast``: registered after the guard, it runs after it)."""

    def __init__(self) -> None:
        self.refused = 0
        self.cancelled: list[Any] = []

    @hookimpl(trylast=True)
    def generation_pre_call(self, payload: Any) -> None:
        if not self.refused:
            self.refused += 1
            raise StopSampling("not this one")

    @hookimpl
    def generation_cancelled(self, payload: Any) -> None:
        self.cancelled.append(payload)


async def test_a_call_refused_after_the_guard_counted_it_gives_its_place_back() -> None:
    totals = Totals()
    guard = BudgetGuard(max_generations_total=1, totals=totals)
    refuse = RefuseAfterTheGuard()
    sampler = Sampler(ScriptedBackend(["yes"]), plugins=[guard, refuse], load_entrypoints=False)
    first = await sampler.sample("q", requirements=[contains("yes")])
    assert first.stop_reason == "stopped_by_plugin" and refuse.refused == 1
    assert totals.started == 0  # no backend call was made
    (cancelled,) = refuse.cancelled
    assert cancelled.usage == NOTHING and not cancelled.backend_called
    again = await sampler.sample("q", requirements=[contains("yes")])
    assert again.success, again.failure_reason


@pytest.mark.parametrize("answered_by", [None, "Replay"])
@pytest.mark.parametrize("usage", [Usage(3, 4, 0.5), UNKNOWN_USAGE])
def test_a_whole_answer_spends_what_the_rule_says(answered_by: str | None, usage: Usage) -> None:
    """``Generation.spent`` writes ``spending`` out (it runs for every attempt): the same."""
    spent = Generation("t", usage, answered_by=answered_by).spent
    assert spent == spending(usage, answered_by)
    assert spent == (usage if answered_by is None else NOTHING)
