"""The tracing plugin: structlog events per hook call, content left out by default."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from builtin_plugins.tracing import EVENT_NAMES, TracingPlugin
from hook_specs import HookName
from sampling_core import GenerationRequest, RetryPolicy, Sampler, TransientBackendError


@pytest.fixture
def strict_plugins() -> bool:
    """The built-in under test runs strict: if it raises in any hook, its tests fail."""
    return True


PROMPT = "SECRET-PROMPT tell me"
ANSWER = "SECRET-ANSWER good"

ALL_EVENTS = {EVENT_NAMES[hook.value] for hook in HookName.per_call()}  # a call's events
PER_ATTEMPT = ALL_EVENTS - {"sampling.loop.start", "sampling.call", "sampling.loop.end"}


def traced(names: list[str]) -> list[str]:
    """The tracing events of these hook calls (one per call)."""
    return [EVENT_NAMES[name] for name in names]


def _two_by_two_backend(scripted_backend: Any) -> Any:
    """Subsample 0: a failed attempt, a transient error, then a backend error.

    Subsample 1 (slower): a failed attempt, then the passing one.
    """
    calls: dict[tuple[int, int], int] = {}

    def failures(request: GenerationRequest) -> BaseException | None:
        info = request.iteration
        key = (info.subsample_index, info.attempt)
        calls[key] = calls.get(key, 0) + 1
        if key == (0, 2):
            if calls[key] == 1:
                return TransientBackendError("rate limited", retry_after=0.0)
            return RuntimeError("backend down")
        return None

    return scripted_backend(
        {0: ["SECRET-ANSWER bad"], 1: ["SECRET-ANSWER bad", ANSWER]},
        latency={1: 0.02},
        failures=failures,
    )


def _run(sampler: Any, backend: Any, plugin: TracingPlugin) -> tuple[Any, list[dict[str, Any]]]:
    s = sampler(
        backend, plugins=[plugin], retry=RetryPolicy(max_retries=2, base_delay=0.0, jitter=0.0)
    )
    with capture_logs() as logs:
        result = s.sample_sync(
            PROMPT,
            requirements=[lambda text: text.endswith("good")],
            loop_budget=2,
            concurrency_budget=2,
        )
    return result, [e for e in logs if e["event"] in ALL_EVENTS]


def test_one_event_per_hook_call_with_its_fields(sampler, scripted_backend, hook_recorder):
    result, events = _run(sampler, _two_by_two_backend(scripted_backend), TracingPlugin())

    assert result.success and result.text == ANSWER
    # One event per hook call, in the order the hooks fired.
    assert [e["event"] for e in events] == traced(hook_recorder.names())
    assert {e["event"] for e in events} == ALL_EVENTS - {"generation.cancelled"}  # none here
    assert all(e["sampling_id"] == result.sampling_id for e in events)
    assert all(e["strategy_name"] == "RejectionSampling" for e in events)

    for event in events:
        if event["event"] in PER_ATTEMPT:
            index, attempt = event["subsample_index"], event["attempt"]
            assert event["iteration"] == index * 2 + attempt

    iterations = [e for e in events if e["event"] == "sampling.iteration"]
    assert len(iterations) == result.iterations_used == 3
    assert sorted(e["sequence"] for e in iterations) == [1, 2, 3]
    by_position = {(a.subsample_index, a.attempt): a for a in result.attempts}
    for event in iterations:
        attempt = by_position[(event["subsample_index"], event["attempt"])]
        assert event["sequence"] == attempt.sequence
        assert event["passed"] is attempt.passed
        assert event["latency_s"] == attempt.latency_s
        assert event["input_tokens"] == attempt.generation.usage.input_tokens > 0
        assert event["output_tokens"] == attempt.generation.usage.output_tokens > 0
        assert (event["valid_count"], event["total_count"]) == (int(attempt.passed), 1)
    assert [e["passed"] for e in iterations if e["subsample_index"] == 1] == [False, True]

    verdicts = [e for e in events if e["event"] == "sampling.validate"]
    assert [e["log_level"] for e in verdicts] == ["debug"] * 3
    assert sorted((e["subsample_index"], e["attempt"], e["passed"]) for e in verdicts) == sorted(
        (a.subsample_index, a.attempt, a.passed) for a in result.attempts
    )
    assert all(e["sequence"] is None and e["total_count"] == 1 for e in verdicts)
    assert all(e["valid_count"] == int(e["passed"]) for e in verdicts)

    post_calls = [e for e in events if e["event"] == "generation.post_call"]
    assert len(post_calls) == 3
    assert all(e["latency_s"] >= 0 and e["model"] == "scripted" for e in post_calls)

    errors = [e for e in events if e["event"] == "generation.error"]
    assert [(e["error_type"], e["will_retry"], e["retry"]) for e in errors] == [
        ("TransientBackendError", True, 0),
        ("RuntimeError", False, 1),
    ]
    assert [e["log_level"] for e in errors] == ["info", "warning"]
    assert [e["retry"] for e in events if e["event"] == "generation.pre_call"].count(1) == 1

    repairs = [e for e in events if e["event"] == "sampling.repair"]
    assert sorted((e["subsample_index"], e["next_attempt"]) for e in repairs) == [(0, 2), (1, 2)]
    assert all(e["failed_checks"] == 1 for e in repairs)

    (start,) = [e for e in events if e["event"] == "sampling.loop.start"]
    assert (start["loop_budget"], start["concurrency_budget"]) == (2, 2)
    (end,) = [e for e in events if e["event"] == "sampling.loop.end"]
    assert end["stop_reason"] == "success" and end["success"] is True
    assert end["iterations_used"] == 3 and end["cancelled"] == 0 and end["error_count"] == 1
    assert end["input_tokens"] == result.usage.input_tokens
    assert end["output_tokens"] == result.usage.output_tokens
    assert (end["picked"], end["failure_reason"]) == (result.picked.sequence, None)


def test_no_prompt_or_output_text_unless_asked(sampler, scripted_backend):
    _, events = _run(sampler, _two_by_two_backend(scripted_backend), TracingPlugin())
    assert "SECRET" not in repr(events)
    assert not any({"messages", "text", "failure_reasons"} & e.keys() for e in events)

    _, events = _run(
        sampler, _two_by_two_backend(scripted_backend), TracingPlugin(capture_content=True)
    )
    (start,) = [e for e in events if e["event"] == "sampling.loop.start"]
    assert start["messages"] == [{"role": "user", "content": PROMPT}]
    passed = [e for e in events if e["event"] == "sampling.iteration" and e["passed"]]
    assert passed[0]["text"] == ANSWER
    (end,) = [e for e in events if e["event"] == "sampling.loop.end"]
    assert end["text"] == ANSWER
    failed = [e for e in events if e["event"] == "sampling.validate" and not e["passed"]]
    assert failed and all(e["failure_reasons"] == ["<lambda>"] for e in failed)


def test_content_capture_follows_the_environment_when_enabled_by_name(monkeypatch):
    monkeypatch.setenv("SAMPLEHOOKS_TRACE_CONTENT", "1")
    assert TracingPlugin().capture_content is True
    assert TracingPlugin(capture_content=False).capture_content is False
    monkeypatch.delenv("SAMPLEHOOKS_TRACE_CONTENT")
    assert TracingPlugin().capture_content is False


def test_error_path_event_names_the_exception(sampler, scripted_backend):
    plugin = TracingPlugin(otel=False)
    s = sampler(scripted_backend(["x"], failures={1: ValueError("boom")}), plugins=[plugin])
    with capture_logs() as logs, pytest.raises(ValueError, match="boom"):
        s.sample_sync("q")
    (end,) = [e for e in logs if e["event"] == "sampling.loop.end"]
    assert (end["stop_reason"], end["error_type"], end["success"]) == ("error", "ValueError", False)
    assert (end["picked"], end["failure_reason"]) == (None, "ValueError: boom")


def test_the_plugin_never_configures_structlog(sampler, scripted_backend, monkeypatch):
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a library must not configure structlog")

    monkeypatch.setattr(structlog, "configure", refuse)
    monkeypatch.setattr(structlog, "configure_once", refuse)
    result, events = _run(sampler, _two_by_two_backend(scripted_backend), TracingPlugin())
    assert result.success and events


def test_enabled_by_name_and_loaded_only_when_named(
    sampler, scripted_backend, plugin_env, hook_recorder
):
    s = sampler(scripted_backend(["ok"]), plugins=["tracing"])
    assert "tracing" in s.plugins.names()
    assert isinstance(s.plugins.get("tracing"), TracingPlugin)
    with capture_logs() as logs:
        s.sample_sync("q")
    assert [e["event"] for e in logs if e["event"] in ALL_EVENTS] == traced(hook_recorder.names())

    # No variable: built-ins stay off, even though their entry points are installed.
    default = Sampler(scripted_backend(["ok"]))
    assert not {"tracing", "ordering", "budget_guard", "progress", "recorder"} & set(
        default.plugins.names()
    )
    plugin_env.only("tracing")
    named = Sampler(scripted_backend(["ok"]))
    assert named.plugins.names() == ["tracing"]


def test_otel_switch(monkeypatch):
    assert TracingPlugin().otel is not None  # the otel extra is installed for the tests
    assert TracingPlugin(otel=False).otel is None
    monkeypatch.setitem(sys.modules, "builtin_plugins.otel", None)  # as if not installed
    assert TracingPlugin().otel is None
    with pytest.raises(ImportError, match=r"samplehooks\[otel\]"):
        TracingPlugin(otel=True)


def test_sampling_validate_shows_the_verdicts_the_other_plugins_left(sampler, scripted_backend):
    import dataclasses

    from hook_specs import hookimpl

    class Waiver:  # registered after tracing: tracing must still see its change
        @hookimpl
        def sampling_validate(self, payload: Any) -> None:
            payload.results = [dataclasses.replace(r, passed=True) for r in payload.results]

    s = sampler(scripted_backend(["x"]), plugins=[TracingPlugin(), Waiver()])
    with capture_logs() as logs:
        result = s.sample_sync("q", requirements=[lambda text: False, lambda text: False])
    assert result.success
    (verdict,) = [e for e in logs if e["event"] == "sampling.validate"]
    assert (verdict["passed"], verdict["valid_count"], verdict["total_count"]) == (True, 2, 2)


def test_a_partly_passing_sampling_validate_is_not_passed(sampler, scripted_backend):
    s = sampler(scripted_backend(["x"]), plugins=[TracingPlugin()])
    with capture_logs() as logs:
        result = s.sample_sync("q", requirements=[lambda text: True, lambda text: False])
    assert not result.success
    (verdict,) = [e for e in logs if e["event"] == "sampling.validate"]
    assert (verdict["passed"], verdict["valid_count"], verdict["total_count"]) == (False, 1, 2)
