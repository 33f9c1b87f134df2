"""One reading of recorded events: ``trace show`` and the view see the same attempts.

A recorded file is read by :mod:`sampling_core.events.reading` and interpreted into calls and
attempts by :mod:`sampling_core.events.attempts`; these tests hold the two commands to the
same facts, and bad input to the one documented rule (strict: one line naming the line and
the field; the view: the line counted and skipped).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from builtin_plugins.recorder import RecorderPlugin
from sampling_core import Sampler, ScriptedBackend
from sampling_core.events.attempts import read_calls
from sampling_core.events.reading import EventFileError, numbered_events
from sampling_core.requirements.checks import max_words
from sampling_core.view.timeline import lanes_from_call, read_events_by_call
from tests.support.reliability_helpers import assert_refused, invoke

# (subsample, attempt) -> what every reader must say of it, for each recorded call.
EXPECTED = {
    (0, 1): ("failed", 1),  # too long: repaired, then
    (0, 2): ("passed", 2),
    (1, 1): ("error", None),  # the backend raised
    (2, 1): ("cancelled", None),  # in flight when subsample 0 passed
}


async def _record_two_calls(path: Path) -> list[str]:
    async def reply(request: Any) -> str:
        info = request.iteration
        if info.subsample_index == 0:
            if info.attempt == 1:
                return "far too many words for the check"
            await anyio.sleep(0.02)  # subsample 2 is in flight meanwhile
            return "ok"
        if info.subsample_index == 1:
            raise RuntimeError("down")
        await anyio.sleep(60)
        return "never"

    recorder = RecorderPlugin(path, capture_content=True)
    sampler = Sampler(ScriptedBackend(reply), plugins=[recorder], load_entrypoints=False)
    ids = []
    for _ in range(2):
        result = await sampler.sample(
            "q", requirements=[max_words(3)], loop_budget=2, concurrency_budget=3
        )
        assert result.success and result.cancelled == 1
        ids.append(result.sampling_id)
    recorder.close()
    return ids


def _trace_facts(path: Path, *args: str) -> dict[str, dict[tuple[int, int], tuple]]:
    """Per call, per attempt: (outcome in the view's words, sequence, latency, tokens)."""
    shown = invoke("trace", "show", path, "--json", *args)
    assert shown.exit_code == 0, shown.output
    words = {"cancelled": "cancelled", "in flight": "cancelled"}
    facts = {}
    for call in json.loads(shown.stdout):
        facts[call["sampling_id"]] = {
            (a["subsample_index"], a["attempt"]): (
                ("passed" if a["passed"] else "failed")
                if a["outcome"] == "completed"
                else words.get(a["outcome"], a["outcome"].split(":")[0]),
                a["sequence"],
                a["latency_s"],
                None if a["input_tokens"] is None else a["input_tokens"] + a["output_tokens"],
            )
            for a in call["attempts"]
        }
    return facts


def _view_facts(lanes: list[dict[str, Any]]) -> dict[tuple[int, int], tuple]:
    return {
        (lane["subsample"], step["attempt"]): (
            step["outcome"],
            step.get("sequence"),
            step.get("latency_s"),
            step.get("tokens"),
        )
        for lane in lanes
        for step in lane["steps"]
    }


@pytest.mark.anyio
async def test_trace_show_and_the_view_see_the_same_attempts(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    first, second = await _record_two_calls(path)
    traced = _trace_facts(path)
    assert list(traced) == [first, second]  # two calls, in the order they started
    every_call = read_calls(path)
    for index, sampling_id in enumerate((first, second)):
        found = read_events_by_call(path, {sampling_id})  # the view's filter by call
        assert list(found.by_call) == [sampling_id] and found.bad_lines == 0
        viewed = _view_facts(lanes_from_call(found.by_call[sampling_id]))
        assert viewed == traced[sampling_id]
        assert {key: fact[:2] for key, fact in viewed.items()} == EXPECTED
        # the whole file read unfiltered agrees too
        assert every_call[index].sampling_id == sampling_id
        assert _view_facts(lanes_from_call(every_call[index])) == viewed
    assert _trace_facts(path, "--call", second[:8]) == {second: traced[second]}

    (call, _) = read_calls(path)
    repaired, error = call.attempts[(0, 1)], call.attempts[(1, 1)]
    # the recorder listens to chunks, so the answer streamed and stopped at its 4th word
    assert repaired.reasons == ["The answer has 4 words; it must have at most 3."]
    assert repaired.text == "far too many words"
    assert repaired.stopped_early and repaired.chunks == 4
    assert error.outcome == "error: RuntimeError" and error.verdict == "error"
    assert error.reasons == ["RuntimeError: down"]
    cancelled = call.attempts[(2, 1)]
    assert cancelled.outcome == "cancelled" and cancelled.started is not None
    assert call.started_at is not None and call.end is not None


def _line(hook: str, time: float = 1.0, **payload: Any) -> str:
    payload = {"sampling_id": "c1", "subsample_index": 0, "attempt": 1, **payload}
    return json.dumps({"hook": hook, "time": time, "payload": payload}) + "\n"


GOOD = [
    _line("sampling_loop_start", 1.0, loop_budget=1, concurrency_budget=1),
    _line("generation_pre_call", 1.0, iteration=1),
    _line("sampling_iteration", 1.5, iteration=1, sequence=1, passed=True, latency_s=0.5),
    _line("sampling_loop_end", 2.0, elapsed_s=1.0),
]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (_line("sampling_iteration", passed="yes"), "passed must be true or false, got 'yes'"),
        (_line("generation_pre_call", attempt="1"), "attempt must be an integer, got '1'"),
        (_line("generation_pre_call", attempt=True), "attempt must be an integer, got True"),
        (_line("generation_post_call", latency_s=[]), "latency_s must be a number, got []"),
        (_line("generation_error", will_retry=0), "will_retry must be true or false, got 0"),
        (_line("sampling_loop_end", elapsed_s="slow"), "elapsed_s must be a number, got 'slow'"),
        (_line("sampling_iteration", validations=[1]), "validations must hold objects, got 1"),
        (_line("sampling_iteration", 1.5, sampling_id=7), "sampling_id must be a string, got 7"),
    ],
)
def test_a_field_of_the_wrong_type_is_one_line_naming_it_or_skipped_by_the_view(
    tmp_path: Path, bad: str, message: str
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(GOOD[0] + bad + "".join(GOOD[1:]))
    hook = json.loads(bad)["hook"]
    expected = f"line 2 ({hook}): {message}"
    with pytest.raises(EventFileError) as raised:
        read_calls(path)
    assert str(raised.value) == expected
    line = assert_refused(invoke("trace", "show", path), str(path))
    assert line == f"samplehooks: error: {path}: {expected}"
    told: list[EventFileError] = []  # a reader given on_bad_line is told the same line
    read_calls(path, on_bad_line=told.append)
    assert [str(error) for error in told] == [expected]
    # The view skips the whole line (nothing of it applied) and counts it.
    found = read_events_by_call(path, {"c1"})
    assert found.bad_lines == 1
    (lane,) = lanes_from_call(found.by_call["c1"])
    assert [(s["attempt"], s["outcome"], s["sequence"]) for s in lane["steps"]] == [
        (1, "passed", 1)
    ]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("not json\n", "line 2 is not JSON"),
        ('{"hook": "x"}\n', 'line 2 is not a recorded hook event (needs "hook" and "payload")'),
        ('"\xff"\n', "line 2 is not UTF-8 text"),
    ],
)
def test_a_line_that_is_not_an_event_is_one_line_or_counted_by_the_view(
    tmp_path: Path, bad: str, message: str
) -> None:
    path = tmp_path / "events.jsonl"
    data = bad.encode("latin-1") if "\xff" in bad else bad.encode()
    path.write_bytes(GOOD[0].encode() + data + "".join(GOOD[1:]).encode())
    with pytest.raises(EventFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_calls(path)
    assert_refused(invoke("trace", "show", path), str(path), message)
    found = read_events_by_call(path, {"c1"})
    assert found.bad_lines == 1 and list(found.by_call) == ["c1"]


def test_a_transport_retry_is_counted_and_the_attempt_starts_at_its_first_call(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text(
        _line("sampling_loop_start", 1.0, loop_budget=1, concurrency_budget=1)
        + _line("generation_pre_call", 1.1, iteration=1, retry=0)
        + _line("generation_error", 1.2, error_type="TransientBackendError", will_retry=True)
        + _line("generation_pre_call", 1.3, iteration=1, retry=1)
        + _line("generation_post_call", 1.5, latency_s=0.2)
        + _line("sampling_iteration", 1.6, iteration=1, sequence=1, passed=True, latency_s=0.2)
        + _line("sampling_loop_end", 2.0, elapsed_s=1.0)
    )
    shown = invoke("trace", "show", path, "--json")
    assert shown.exit_code == 0, shown.output
    ((row,),) = [call["attempts"] for call in json.loads(shown.stdout)]
    assert (row["outcome"], row["retries"], row["started"]) == ("completed", 1, 1.1)
    assert row["t_s"] == pytest.approx(0.6)  # from the call's first event, its start
    table = invoke("trace", "show", path)
    assert table.exit_code == 0 and "1 transport retry" in table.stdout


def test_a_torn_last_line_is_skipped_with_a_note_by_both(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(GOOD) + _line("sampling_iteration")[:30])
    notes: list[str] = []
    (call,) = read_calls(path, on_note=notes.append)
    assert notes == ["line 5 was cut off (a crash while writing); skipped"]
    shown = invoke("trace", "show", path)
    assert shown.exit_code == 0 and "line 5 was cut off" in shown.stderr
    found = read_events_by_call(path, {"c1"})
    assert found.bad_lines == 1
    assert lanes_from_call(found.by_call["c1"]) == lanes_from_call(call)


def test_an_attempt_of_a_call_without_its_end_is_in_flight_to_trace_and_cancelled_to_the_view(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("".join(GOOD[:2]))  # started, never ended: the process was killed
    (call,) = read_calls(path)
    (attempt,) = call.rows()
    assert (attempt.outcome, attempt.verdict) == ("in flight", "cancelled")
    assert "in flight" in invoke("trace", "show", path).stdout
    path.write_text("".join(GOOD[:2]) + GOOD[3])  # ended before the attempt completed
    (call,) = read_calls(path)
    assert call.rows()[0].outcome == "cancelled"


def test_the_reader_streams_and_filters_by_call(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    other = _line("generation_pre_call", sampling_id="c2")
    path.write_text(GOOD[0] + other + GOOD[1] + "\n" + "not json\n")
    events = numbered_events(path, keep_call={"c1"}.__contains__)
    assert [number for number, _ in (next(events), next(events))] == [1, 3]  # c2 and blanks
    with pytest.raises(EventFileError, match="line 5 is not JSON"):
        next(events)  # read lazily: the damage is only met when reached
    skipped: list[EventFileError] = []
    kept = read_calls(path, keep_call="c2".__eq__, on_bad_line=skipped.append)
    assert [call.sampling_id for call in kept] == ["c2"]
    assert [str(error) for error in skipped] == ["line 5 is not JSON (Expecting value)"]


def test_a_judges_model_calls_are_not_the_attempts_generation(tmp_path: Path) -> None:
    """An LLM-as-judge check's backend calls carry the attempt's ids (purpose "judge"): the
    attempt keeps its own latency and tokens, and a judge call failing for good does not
    make the attempt a backend error."""
    ids = {"sampling_id": "c1", "strategy_name": "R", "subsample_index": 0, "attempt": 1}
    ids["iteration"] = 1

    def generation(latency: float, tokens: int) -> dict[str, Any]:
        return {"latency_s": latency, "usage": {"input_tokens": tokens, "output_tokens": tokens}}

    events = [
        {"hook": "generation_pre_call", "time": 1.0, "payload": {**ids, "purpose": "sample"}},
        {
            "hook": "generation_post_call",
            "time": 1.1,
            "payload": {
                **ids,
                "purpose": "sample",
                "latency_s": 0.1,
                "generation": generation(0.1, 5),
            },
        },
        {"hook": "generation_pre_call", "time": 1.2, "payload": {**ids, "purpose": "judge"}},
        {
            "hook": "generation_post_call",
            "time": 1.9,
            "payload": {
                **ids,
                "purpose": "judge",
                "latency_s": 0.7,
                "generation": generation(0.7, 50),
            },
        },
        {"hook": "generation_pre_call", "time": 2.0, "payload": {**ids, "purpose": "judge"}},
        {
            "hook": "generation_error",
            "time": 2.1,
            "payload": {
                **ids,
                "purpose": "judge",
                "will_retry": False,
                "error_type": "ValueError",
                "exception": "ValueError: judge down",
            },
        },
        {"hook": "sampling_loop_end", "time": 2.2, "payload": {"sampling_id": "c1"}},
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(event) + "\n" for event in events))
    (call,) = read_calls(path)
    (attempt,) = call.rows()
    assert (attempt.latency_s, attempt.input_tokens, attempt.output_tokens) == (0.1, 5, 5)
    assert (attempt.started, attempt.retries) == (1.0, 0)
    assert attempt.outcome == "cancelled" and attempt.error_type is None
    assert attempt.reasons == []
