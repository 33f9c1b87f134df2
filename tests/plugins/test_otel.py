"""OpenTelemetry spans of the tracing plugin, checked with the SDK's in-memory exporter."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from builtin_plugins.otel import CANCELLED, OtelPlugin
from builtin_plugins.tracing import TracingPlugin
from sampling_core import GenerationRequest
from tests.support.engine_helpers import race
from tests.support.otel_helpers import metrics_by_name


@pytest.fixture
def strict_plugins() -> bool:
    """The built-in under test runs strict: if it raises in any hook, its tests fail."""
    return True


pytestmark = pytest.mark.anyio

LOOP = "invoke_workflow samplehooks"
ATTEMPT = "samplehooks.attempt"


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def _named(spans: list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


async def test_a_span_per_loop_attempt_and_backend_call(
    sampler, scripted_backend, provider, exporter
):
    # subsample 0 wins at its second attempt; subsample 1's first is cancelled in flight
    backend = scripted_backend(race((0, 2), hanging=1, first=(0, 1)))
    s = sampler(backend, plugins=[TracingPlugin(tracer_provider=provider)])
    result = await s.sample(
        "q",
        requirements=[lambda text: text == "yes"],
        loop_budget=2,
        concurrency_budget=2,
        options={"model": "m-1", "temperature": 0.2, "max_tokens": 64, "stop": ["END"]},
    )
    assert result.success and result.cancelled == 1
    spans = list(exporter.get_finished_spans())

    (loop,) = _named(spans, LOOP)
    assert loop.parent is None and loop.kind is SpanKind.INTERNAL
    assert loop.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert loop.attributes["samplehooks.sampling_id"] == result.sampling_id
    assert loop.attributes["samplehooks.stop_reason"] == "success"
    assert loop.attributes["samplehooks.iterations_used"] == 2
    assert loop.attributes["samplehooks.cancelled_attempts"] == 1
    # the cancelled attempt streamed (tracing listens to chunks) but got no chunk: its
    # input tokens are unknown, so the call's are, and the span leaves them out
    assert result.usage.input_tokens is None and result.usage.output_tokens is not None
    assert "gen_ai.usage.input_tokens" not in loop.attributes
    assert loop.attributes["gen_ai.usage.output_tokens"] == result.usage.output_tokens
    assert loop.status.status_code is StatusCode.UNSET

    attempts = _children(spans, loop)
    assert all(a.name == ATTEMPT for a in attempts)
    by_position = {
        (a.attributes["samplehooks.subsample_index"], a.attributes["samplehooks.attempt"]): a
        for a in attempts
    }
    assert set(by_position) == {(0, 1), (0, 2), (1, 1)}
    assert by_position[(0, 1)].attributes["samplehooks.passed"] is False
    assert by_position[(0, 2)].attributes["samplehooks.passed"] is True
    assert by_position[(0, 2)].attributes["samplehooks.iteration"] == 2
    assert by_position[(0, 2)].attributes["samplehooks.sequence"] == 2

    cancelled = by_position[(1, 1)]
    assert cancelled.attributes["samplehooks.cancelled"] is True
    assert cancelled.attributes["error.type"] == CANCELLED
    assert cancelled.status.status_code is StatusCode.ERROR

    for position, attempt in by_position.items():
        (call,) = _children(spans, attempt)
        assert call.kind is SpanKind.CLIENT and call.name == "chat m-1"
        attributes = call.attributes
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.provider.name"]
        assert attributes["gen_ai.request.model"] == "m-1"
        assert attributes["gen_ai.request.temperature"] == 0.2
        assert attributes["gen_ai.request.max_tokens"] == 64
        assert tuple(attributes["gen_ai.request.stop_sequences"]) == ("END",)
        assert call.start_time >= attempt.start_time and call.end_time <= attempt.end_time
        if position == (1, 1):
            assert attributes["samplehooks.cancelled"] is True
            assert call.status.status_code is StatusCode.ERROR
            continue
        assert attributes["gen_ai.response.model"] == "scripted"
        assert tuple(attributes["gen_ai.response.finish_reasons"]) == ("stop",)
        assert attributes["gen_ai.usage.input_tokens"] == 1
        assert attributes["gen_ai.usage.output_tokens"] == 1
        assert "gen_ai.input.messages" not in attributes
        assert "gen_ai.output.messages" not in attributes
    assert len(spans) == 1 + 3 + 3


async def test_backend_failures_set_error_type(sampler, scripted_backend, provider, exporter):
    s = sampler(
        scripted_backend(["x"], failures={1: ValueError("boom")}),
        plugins=[OtelPlugin(tracer_provider=provider, provider_name="acme")],
    )
    with pytest.raises(ValueError, match="boom"):
        await s.sample("q")
    spans = list(exporter.get_finished_spans())
    (loop,) = _named(spans, LOOP)
    (attempt,) = _children(spans, loop)
    (call,) = _children(spans, attempt)
    assert call.name == "chat"
    assert call.attributes["gen_ai.provider.name"] == "acme"
    for span in (call, attempt, loop):
        assert span.attributes["error.type"] == "ValueError"
        assert span.status.status_code is StatusCode.ERROR
    assert call.attributes["samplehooks.will_retry"] is False
    assert [e.name for e in call.events] == ["exception"]
    assert call.events[0].attributes["exception.message"] == "boom"
    assert call.events[0].attributes["exception.type"] == "ValueError"
    assert loop.attributes["samplehooks.stop_reason"] == "error"
    assert loop.attributes["samplehooks.failure_reason"] == "ValueError: boom"
    assert "samplehooks.picked" not in loop.attributes


class Unprintable(RuntimeError):
    def __str__(self) -> str:
        raise ValueError("cannot print this one")


async def test_an_exception_that_cannot_be_printed_is_recorded_on_the_spans(
    sampler, scripted_backend, provider, exporter
):
    s = sampler(
        scripted_backend(["x"], failures={1: Unprintable()}),
        plugins=[OtelPlugin(tracer_provider=provider)],
    )
    with pytest.raises(Unprintable):
        await s.sample("q")
    spans = list(exporter.get_finished_spans())
    (loop,) = _named(spans, LOOP)
    (attempt,) = _children(spans, loop)
    (call,) = _children(spans, attempt)
    for span in (call, loop):
        [event] = span.events
        assert event.attributes["exception.message"] == "<unprintable Unprintable>"
        assert event.attributes["exception.type"].endswith("Unprintable")
        assert span.status.description.endswith("<unprintable Unprintable>")
    assert loop.attributes["samplehooks.failure_reason"] == "Unprintable: <unprintable Unprintable>"


async def test_the_call_span_is_a_child_of_the_callers_span(
    sampler, scripted_backend, provider, exporter
):
    s = sampler(scripted_backend(["ok"]), plugins=[OtelPlugin(tracer_provider=provider)])
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("request") as outer:
        await s.sample("q")
    (loop,) = _named(list(exporter.get_finished_spans()), LOOP)
    assert loop.parent is not None and loop.parent.span_id == outer.get_span_context().span_id


async def test_concurrent_calls_get_separate_trees(sampler, scripted_backend, provider, exporter):
    plugin = OtelPlugin(tracer_provider=provider)
    s = sampler(scripted_backend(["a", "b"], latency=0.005), plugins=[plugin])
    results: list[Any] = []

    async def one() -> None:
        results.append(
            await s.sample("q", requirements=[lambda t: False], loop_budget=2, concurrency_budget=2)
        )

    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(one)
    spans = list(exporter.get_finished_spans())
    loops = _named(spans, LOOP)
    assert sorted(span.attributes["samplehooks.sampling_id"] for span in loops) == sorted(
        r.sampling_id for r in results
    )
    for loop in loops:
        attempts = _children(spans, loop)
        assert len(attempts) == 4
        assert {a.attributes["samplehooks.sampling_id"] for a in attempts} == {
            loop.attributes["samplehooks.sampling_id"]
        }
        assert all(len(_children(spans, a)) == 1 for a in attempts)
    assert plugin.open_spans() == 0


async def test_content_only_when_asked(sampler, scripted_backend, provider, exporter):
    s = sampler(
        scripted_backend(["the answer"]),
        plugins=[OtelPlugin(tracer_provider=provider, capture_content=True)],
    )
    await s.sample("the question")
    (call,) = _named(list(exporter.get_finished_spans()), "chat")
    assert "the question" in call.attributes["gen_ai.input.messages"]
    assert "the answer" in call.attributes["gen_ai.output.messages"]


async def test_the_provider_name_comes_from_the_backend(sampler, provider, exporter):
    from sampling_core import ScriptedBackend
    from sampling_core.backends import LocalBackend, OpenAIBackend

    class Vllm(ScriptedBackend):
        provider_name = "vllm"

    for backend, expected in (
        (ScriptedBackend(["ok"]), "samplehooks.scripted"),
        (Vllm(["ok"]), "vllm"),
    ):
        exporter.clear()
        await sampler(backend, plugins=[OtelPlugin(tracer_provider=provider)]).sample("q")
        (call,) = _named(list(exporter.get_finished_spans()), "chat")
        assert call.attributes["gen_ai.provider.name"] == expected
    assert OpenAIBackend.provider_name == "openai"
    assert LocalBackend.provider_name == "llama.cpp"


async def test_genai_client_metrics_per_backend_call(sampler, scripted_backend, provider):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from builtin_plugins.otel_metrics import DURATION_BUCKETS, TOKEN_BUCKETS

    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])

    def reply(request: GenerationRequest) -> str:
        if request.iteration.attempt == 1:
            raise ValueError("backend down")  # not transient: ends subsample 0
        return "never"

    plugin = OtelPlugin(tracer_provider=provider, meter_provider=meters, provider_name="openai")
    s = sampler(scripted_backend(["one two three"]), plugins=[plugin])
    await s.sample(
        "q", loop_budget=1, concurrency_budget=2, early_exit=False, options={"model": "m-1"}
    )
    with pytest.raises(ValueError):
        await sampler(scripted_backend(reply), plugins=[plugin]).sample(
            "q", options={"model": "m-1"}
        )
    found = metrics_by_name(reader)
    tokens, duration = found["gen_ai.client.token.usage"], found["gen_ai.client.operation.duration"]
    assert (tokens.unit, duration.unit) == ("{token}", "s")
    base = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "m-1",
    }
    points = {(p.attributes["gen_ai.token.type"]): p for p in tokens.data.data_points}
    assert set(points) == {"input", "output"}
    for kind, point in points.items():
        assert dict(point.attributes) == {
            **base,
            "gen_ai.token.type": kind,
            "gen_ai.response.model": "scripted",
        }
        assert point.count == 2  # two calls returned
        assert list(point.explicit_bounds) == TOKEN_BUCKETS
    assert points["output"].sum == 6  # "one two three" twice
    by_error = {p.attributes.get("error.type"): p for p in duration.data.data_points}
    assert set(by_error) == {None, "ValueError"}
    assert by_error[None].count == 2 and by_error["ValueError"].count == 1
    assert list(by_error[None].explicit_bounds) == DURATION_BUCKETS
    assert {k: by_error["ValueError"].attributes[k] for k in base} == base


@pytest.mark.parametrize("fails", [False, True], ids=["returned", "failed"])
async def test_a_calls_duration_is_the_engines_measure(
    sampler, scripted_backend, provider, fails: bool
):
    """A call's duration is the latency its payload carries (``generation_post_call``'s, or
    ``generation_error``'s, measured by the engine from just before the backend call), not
    the time since the plugin's own ``generation_pre_call``: a slow plugin running after it
    there must not count as model time."""
    import time

    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from hook_specs import hookimpl

    class SlowBeforeTheCall:
        @hookimpl(trylast=True)  # runs after the OTel plugin's generation_pre_call
        def generation_pre_call(self, payload: Any) -> None:
            time.sleep(0.05)

    latencies: list[float] = []

    class Latency:
        @hookimpl
        def generation_post_call(self, payload: Any) -> None:
            latencies.append(payload.latency_s)

        @hookimpl
        def generation_error(self, payload: Any) -> None:
            latencies.append(payload.latency_s)

    reader = InMemoryMetricReader()
    plugin = OtelPlugin(tracer_provider=provider, meter_provider=MeterProvider([reader]))
    failures = {1: ValueError("broken")} if fails else None
    backend = scripted_backend(["ok"], latency=0.01, failures=failures)
    s = sampler(backend, plugins=[plugin, SlowBeforeTheCall()])
    if fails:
        with pytest.raises(ValueError, match="broken"):
            await s.sample("q", loop_budget=1, plugins=[Latency()])
    else:
        await s.sample("q", loop_budget=1, plugins=[Latency()])
    duration = metrics_by_name(reader)["gen_ai.client.operation.duration"]
    (point,) = duration.data.data_points
    assert point.attributes.get("error.type") == ("ValueError" if fails else None)
    assert point.count == 1 and len(latencies) == 1
    assert point.sum == latencies[0]
    assert 0.01 <= point.sum < 0.05


async def test_the_call_span_is_an_invoke_workflow_span(
    sampler, scripted_backend, provider, exporter
):
    s = sampler(scripted_backend(["x"]), plugins=[OtelPlugin(tracer_provider=provider)])
    await s.sample("q", seed=5)
    (loop,) = _named(list(exporter.get_finished_spans()), LOOP)
    assert loop.kind == SpanKind.INTERNAL
    assert loop.attributes["gen_ai.operation.name"] == "invoke_workflow"
    assert loop.name == f"invoke_workflow {loop.attributes['gen_ai.workflow.name']}"
    assert "gen_ai.agent.name" not in loop.attributes  # an agent span's attribute, not ours
    assert loop.attributes["samplehooks.seed"] == 5


async def test_the_backend_runs_in_its_call_span_and_a_cut_call_says_why(
    sampler, scripted_backend, provider, exporter
):
    """The backend-call span is opened around the call (a wrapper): what an instrumented
    client does while the backend works nests under it; a call cut short by a sibling's
    success is ended with its reason, and so is its attempt."""
    client = provider.get_tracer("http-client")
    slow_began = anyio.Event()

    async def reply(request: GenerationRequest) -> str:
        with client.start_as_current_span("POST /v1/chat/completions"):
            if request.iteration.subsample_index == 1:
                slow_began.set()
                await anyio.sleep_forever()
            await slow_began.wait()
            return "yes"

    s = sampler(scripted_backend(reply), plugins=[OtelPlugin(tracer_provider=provider)])
    result = await s.sample("q", requirements=[lambda t: t == "yes"], concurrency_budget=2)
    assert result.success and result.cancelled == 1
    spans = list(exporter.get_finished_spans())
    (loop,) = _named(spans, LOOP)
    attempts = {a.attributes["samplehooks.subsample_index"]: a for a in _children(spans, loop)}
    for index, attempt in attempts.items():
        (call,) = _children(spans, attempt)
        (http,) = _children(spans, call)  # the client's span is the call span's child
        assert http.name == "POST /v1/chat/completions"
        if index == 1:
            for span in (call, attempt):
                assert span.attributes["samplehooks.cancel_reason"] == "sibling_succeeded"
                assert span.attributes["error.type"] == CANCELLED
                assert span.status.description == "cancelled: sibling_succeeded"
    assert s.plugins.get("OtelPlugin").open_spans() == 0
