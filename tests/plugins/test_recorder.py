"""The recorder plugin, and `samplehooks trace show` reading what it wrote."""

from __future__ import annotations

import dataclasses
import gc
import json
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from builtin_plugins.recorder import RecorderPlugin, read_events
from hook_specs import Generation, Usage, ValidationResult, hookimpl
from sampling_core import GenerationRequest, Requirement, Sampler, ScriptedBackend
from sampling_core.cli.app import app
from sampling_core.cli.trace_cmd import trace_app
from sampling_core.events.attempts import read_calls
from tests.support.engine_helpers import race


@pytest.fixture
def strict_plugins() -> bool:
    """The built-in under test runs strict: if it raises in any hook, its tests fail."""
    return True


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_hook_event_is_one_json_line(tmp_path, sampler, scripted_backend, hook_recorder):
    path = tmp_path / "deep" / "events.jsonl"
    recorder = RecorderPlugin(path)

    def reply(request: GenerationRequest) -> Generation:
        # `raw` may hold anything a backend returns; it is never written.
        text = "SECRET-OUT yes" if request.iteration.attempt == 2 else "SECRET-OUT no"
        return Generation(text, Usage(3, 2), "stop", "m", raw=object())

    s = sampler(scripted_backend(reply), plugins=[recorder])
    with recorder:
        result = s.sample_sync(
            "SECRET-PROMPT",
            requirements=[lambda t: t.endswith("yes")],
            loop_budget=2,
            concurrency_budget=2,
        )
    events = lines(path)
    # every hook call, in firing order
    assert [e["hook"] for e in events] == hook_recorder.names()
    assert recorder.lines_written == len(events)
    assert all(e["payload"]["sampling_id"] == result.sampling_id for e in events)
    assert all(isinstance(e["time"], float) for e in events)
    assert "SECRET" not in path.read_text() and "raw" not in path.read_text()

    iterations = [e["payload"] for e in events if e["hook"] == "sampling_iteration"]
    assert sorted(p["sequence"] for p in iterations) == list(range(1, result.iterations_used + 1))
    assert all(
        p["usage"] == {"input_tokens": 3, "output_tokens": 2, "cost_usd": None} for p in iterations
    )
    (end,) = [e["payload"] for e in events if e["hook"] == "sampling_loop_end"]
    assert end["stop_reason"] == "success" and end["iterations_used"] == result.iterations_used


@pytest.mark.parametrize("capture_content", [False, True])
def test_the_loop_end_line_holds_every_attempt_the_pick_and_why_it_failed(
    tmp_path, sampler, scripted_backend, capture_content
):
    path = tmp_path / "events.jsonl"
    recorder = RecorderPlugin(path, capture_content=capture_content)

    def fails(text: str) -> Any:
        return ValidationResult(False, reason=f"SECRET-REASON {text}", score=0.5)

    s = sampler(scripted_backend(["SECRET-A", "SECRET-B"]), plugins=[recorder])
    with recorder:
        s.sample_sync("q", requirements=[Requirement("no secrets", fails)], loop_budget=2)
    (end,) = [e["payload"] for e in lines(path) if e["hook"] == "sampling_loop_end"]
    verdict = {"requirement": "no secrets", "passed": False, "score": 0.5}
    expected = [  # the one JSON shape of an attempt, as a record's entry
        {
            "subsample": 0,
            "attempt": number,
            "iteration": number,
            "sequence": number,
            "passed": False,
            "input_tokens": 1,
            "output_tokens": 1,
            "cost_usd": None,
            "finish_reason": "stop",
            "model": "scripted",
            "provenance": {"kind": "whole"},  # how its text came to be
            "unmet": ["no secrets"],
            "validations": [verdict],  # no "score": no scorer scored it
        }
        for number in (1, 2)
    ]
    if capture_content:
        for row, text in zip(expected, ("SECRET-A", "SECRET-B"), strict=True):
            row["text"] = text
            row["failed"] = [f"SECRET-REASON {text}"]
            row["validations"] = [{**verdict, "reason": f"SECRET-REASON {text}"}]
    assert all(isinstance(a.pop("latency_s"), float) for a in end["attempts"])
    assert end["attempts"] == expected  # no prompt: the generation events hold it
    assert end["picked"] == 1  # the best score: a tie, so the first
    assert end["failure_reason"] == "unmet requirements: no secrets"
    assert ("SECRET" in path.read_text()) is capture_content


def test_verdicts_are_recorded_as_the_plugins_left_them(tmp_path, sampler, scripted_backend):
    path = tmp_path / "events.jsonl"

    class Lenient:
        @hookimpl
        def sampling_validate(self, payload: Any) -> None:
            payload.results = [
                dataclasses.replace(r, passed=True, reason="waived") for r in payload.results
            ]

    s = sampler(scripted_backend(["SECRET-OUT"]), plugins=[Lenient(), RecorderPlugin(path)])
    result = s.sample_sync("q", requirements=[lambda t: False])
    assert result.success
    (validate,) = [e["payload"] for e in lines(path) if e["hook"] == "sampling_validate"]
    assert validate["results"] == [
        {
            "requirement": validate["results"][0]["requirement"],
            "passed": True,
            "score": None,
            "answer": None,
        }
    ]
    assert "SECRET" not in path.read_text() and "waived" not in path.read_text()
    assert "text" not in validate and "messages" not in validate


def test_content_is_written_when_asked(tmp_path, sampler, scripted_backend):
    path = tmp_path / "events.jsonl"
    s = sampler(
        scripted_backend(["the answer"]), plugins=[RecorderPlugin(path, capture_content=True)]
    )
    s.sample_sync("the question")
    events = {e["hook"]: e["payload"] for e in lines(path)}
    assert events["sampling_loop_start"]["messages"][0]["content"] == "the question"
    assert events["sampling_iteration"]["text"] == "the answer"
    assert events["generation_post_call"]["generation"]["text"] == "the answer"
    assert "raw" not in events["generation_post_call"]["generation"]


def test_errors_are_written_as_text(tmp_path, sampler, scripted_backend):
    path = tmp_path / "events.jsonl"
    backend = scripted_backend(["x"], failures={1: ValueError("boom")})
    s = sampler(backend, plugins=[RecorderPlugin(path)], load_entrypoints=False)
    with pytest.raises(ValueError):
        s.sample_sync("q")
    events = {e["hook"]: e["payload"] for e in lines(path)}
    assert events["generation_error"]["exception"] == "ValueError: boom"
    assert events["generation_error"]["will_retry"] is False
    assert events["sampling_loop_end"]["exception"] == "ValueError: boom"


@pytest.mark.anyio
async def test_concurrent_calls_share_one_file(tmp_path, sampler, scripted_backend, hook_recorder):
    path = tmp_path / "events.jsonl"
    recorder = RecorderPlugin(path)
    s = sampler(scripted_backend(["x"], latency=0.001), plugins=[recorder])

    async def one() -> None:
        await s.sample("q", requirements=[lambda t: False], loop_budget=2, concurrency_budget=3)

    async with anyio.create_task_group() as group:
        for _ in range(10):
            group.start_soon(one)
    recorder.close()
    events = read_events(path)
    # start, end; pre/chunk/post/validate/iteration per attempt (streamed: the recorder
    # implements generation_chunk); repairs
    assert len(events) == 10 * (2 + 6 * 5 + 3) + 10 * (1 + 6)
    # and the call hooks: one sampling_call per call, one generation_call per attempt
    assert len(hook_recorder) == 10 * (2 + 6 * 5 + 3) + 10 * (1 + 6)
    assert len({e["payload"]["sampling_id"] for e in events}) == 10


def test_enabled_by_name_writes_where_the_environment_says(
    tmp_path, sampler, scripted_backend, monkeypatch
):
    path = tmp_path / "named.jsonl"
    monkeypatch.setenv("SAMPLEHOOKS_RECORDER_PATH", str(path))
    s = sampler(scripted_backend(["x"]), plugins=["recorder"])
    s.sample_sync("q")
    s.plugins.get("recorder").close()
    hooks = [e["hook"] for e in read_events(path)]
    assert hooks[0] == "sampling_loop_start" and hooks[-1] == "sampling_loop_end"


# -- samplehooks trace show -------------------------------------------------------------


def _record_a_call(path: Path, sampler: Any, scripted_backend: Any) -> Any:
    recorder = RecorderPlugin(path)
    # subsample 0 fails, 1 wins at its second attempt, 2's first is cancelled in flight
    s = sampler(
        scripted_backend(
            race((1, 2), hanging=2, first=(1, 1)),
            failures=lambda r: RuntimeError("down") if r.iteration.subsample_index == 0 else None,
        ),
        plugins=[recorder],
    )
    result = s.sample_sync(
        "q", requirements=[lambda t: t == "yes"], loop_budget=2, concurrency_budget=3
    )
    recorder.close()
    return result


def test_timeline_of_a_recorded_call(tmp_path, sampler, scripted_backend):
    path = tmp_path / "events.jsonl"
    result = _record_a_call(path, sampler, scripted_backend)
    (timeline,) = read_calls(path)
    assert timeline.sampling_id == result.sampling_id
    rows = timeline.rows()
    outcomes = {(r.subsample_index, r.attempt): r.outcome for r in rows}
    assert outcomes == {
        (0, 1): "error: RuntimeError",
        (1, 1): "completed",
        (1, 2): "completed",
        (2, 1): "cancelled",
    }
    completed = [r for r in rows if r.outcome == "completed"]
    assert [r.sequence for r in completed] == [1, 2]
    assert [r.passed for r in completed] == [False, True]
    assert rows[-1].outcome == "cancelled"  # unfinished attempts come last

    out = CliRunner().invoke(app, ["trace", "show", str(path)])
    assert out.exit_code == 0, out.output
    assert result.sampling_id in out.output
    for header in ("iteration", "subsample", "attempt", "sequence", "passed", "latency"):
        assert header in out.output
    assert "cancelled" in out.output and "RuntimeError" in out.output
    assert "stop_reason=success" in out.output


def test_trace_show_filters_calls(tmp_path, sampler, scripted_backend):
    path = tmp_path / "events.jsonl"
    first = _record_a_call(path, sampler, scripted_backend)
    second = _record_a_call(path, sampler, scripted_backend)
    out = CliRunner().invoke(trace_app, ["show", str(path), "--call", second.sampling_id[:6]])
    assert out.exit_code == 0, out.output
    assert second.sampling_id in out.output and first.sampling_id not in out.output
    out = CliRunner().invoke(trace_app, ["show", str(path), "--call", "zzz"])
    assert out.exit_code == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("not json\n", "line 1 is not JSON"),
        ('{"hook": "sampling_loop_start"}\n', "line 1 is not a recorded hook event"),
        ("[1, 2]\n", "line 1 is not a recorded hook event"),
    ],
)
def test_trace_show_rejects_a_bad_file_in_one_line(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    if content is not None:
        path.write_text(content)
    out = CliRunner().invoke(trace_app, ["show", str(path)])
    assert out.exit_code == 2
    assert message in out.output
    assert len(out.output.strip().splitlines()) == 1


@pytest.mark.parametrize("capture_content", [False, True])
def test_raw_is_never_written_for_sampling_validate(
    tmp_path, sampler, scripted_backend, capture_content
):
    path = tmp_path / "events.jsonl"
    recorder = RecorderPlugin(path, capture_content=capture_content)
    backend = scripted_backend(lambda request: Generation("x", Usage(1, 1), raw=object()))
    sampler(backend, plugins=[recorder]).sample_sync("q", requirements=[lambda t: False])
    events = lines(path)
    validated = [e["payload"]["generation"] for e in events if e["hook"] == "sampling_validate"]
    assert validated and all(g["usage"]["input_tokens"] == 1 for g in validated)
    assert all(("text" in g) is capture_content for g in validated)
    assert not [e for e in events if "raw" in e["payload"].get("generation", {})]
    assert "object object" not in path.read_text()  # nor its repr anywhere


class Unprintable(RuntimeError):
    """An exception that prints on the thread that raised it and nowhere else."""

    def __init__(self) -> None:
        super().__init__()
        self.raised_on = threading.get_ident()

    def __str__(self) -> str:
        if threading.get_ident() != self.raised_on:
            raise ValueError("this exception cannot be printed here")
        return "down"


def test_an_exception_that_cannot_be_printed_is_recorded_as_unprintable(tmp_path):
    path = tmp_path / "events.jsonl"

    def reply(request: GenerationRequest) -> str:
        raise Unprintable()

    s = Sampler(ScriptedBackend(reply), plugins=[RecorderPlugin(path)], load_entrypoints=False)
    with pytest.raises(Unprintable):
        s.sample_sync("q")
    # All six events are written in one batch, at the call's end, by the background
    # worker, where the exception's str() raises: it is written as unprintable.
    events = lines(path)
    assert [e["hook"] for e in events] == [
        "sampling_loop_start",
        "sampling_call",
        "generation_pre_call",
        "generation_call",
        "generation_error",
        "sampling_loop_end",
    ]
    assert events[4]["payload"]["exception"] == "Unprintable: <unprintable Unprintable>"
    end = events[5]["payload"]
    assert end["exception"] == "Unprintable: <unprintable Unprintable>"
    assert end["failure_reason"] == "Unprintable: down"  # made on the raising thread
    assert s.background_faults == []


def test_an_event_that_cannot_be_encoded_is_reported_and_the_others_are_written(tmp_path):
    path = tmp_path / "events.jsonl"

    class Odd:
        def __repr__(self) -> str:
            raise ValueError("no repr either")

    recorder = RecorderPlugin(path)
    recorder.output.note("sampling_loop_start", {"sampling_id": "c1"})
    recorder.output.note("sampling_iteration", {"sampling_id": "c1", "odd": Odd()})
    recorder.output.note("sampling_loop_end", {"sampling_id": "c1"})
    with pytest.raises(ValueError, match="no repr either"):  # the worker reports it
        recorder.output.write_noted()
    assert [e["hook"] for e in lines(path)] == ["sampling_loop_start", "sampling_loop_end"]


def test_a_recorder_never_closed_writes_what_it_noted_when_collected(tmp_path):
    path = tmp_path / "events.jsonl"
    recorder = RecorderPlugin(path)
    recorder.output.note("sampling_loop_start", {"sampling_id": "c1"})
    recorder.output.note("sampling_loop_end", {"sampling_id": "c1"})
    assert not path.exists()  # noted, not yet written
    del recorder
    gc.collect()
    assert [(e["hook"], e["payload"]) for e in lines(path)] == [
        ("sampling_loop_start", {"sampling_id": "c1"}),
        ("sampling_loop_end", {"sampling_id": "c1"}),
    ]
