"""One record, one attempt shape, one failure label, and provenance on every attempt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from hook_specs import Provenance, StopSampling, hookimpl
from hook_specs.records import WHOLE, CachedGeneration, Generation
from sampling_core import Requirement, Sampler, ScriptedBackend
from sampling_core.cli.app import app
from sampling_core.cli.sample_output import result_as_dict
from sampling_core.requirements.checks import max_words
from sampling_core.runs import run_batch
from sampling_core.runs.store.record import AttemptEntry, RunRecord, read_record
from sampling_core.view.data import run_data
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio


def sampler(backend: Any, *plugins: Any) -> Sampler:
    return Sampler(backend, plugins=list(plugins), load_entrypoints=False)


class Chunks:
    """Makes the backend stream (someone needs the pieces)."""

    @hookimpl
    def generation_chunk(self, payload: Any) -> None:
        pass


# -- provenance ----------------------------------------------------------------------------


async def test_a_cut_attempt_says_which_check_cut_it_and_how_much_was_generated() -> None:
    backend = ScriptedBackend(["a b c d e f g", "ok"])
    result = await sampler(backend).sample("q", requirements=[max_words(3)], loop_budget=2)
    cut, whole = result.attempts
    assert cut.provenance == Provenance(("at most 3 words",), len("a b c d"), 4)
    assert cut.provenance.kind == "stopped_early" and not cut.provenance.whole
    assert whole.provenance is WHOLE and whole.provenance.kind == "whole"


async def test_a_cached_or_plugin_answered_generation_says_so() -> None:
    cached = CachedGeneration("hi", entry="k1")

    async def answer(request: Any) -> Generation:
        return cached

    result = await sampler(ScriptedBackend(answer)).sample("q", loop_budget=1)
    assert result.attempts[0].provenance.as_json() == {
        "kind": "cached",
        "cached": True,
        "cache_entry": "k1",
    }

    by_plugin = Generation("hi", answered_by="faker")
    result = await sampler(ScriptedBackend(lambda r: by_plugin)).sample("q", loop_budget=1)
    assert result.attempts[0].provenance.as_json() == {"kind": "plugin", "answered_by": "faker"}


async def test_provenance_travels_to_the_record_and_the_loop_end_dump(tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "d.jsonl", 1)
    config = write_config(
        tmp_path / "c.yaml",
        data,
        backend={"kind": "scripted", "replies": ["one two three four five six", "ok"]},
        requirements=[{"max_words": 3}],
        budgets={"loop_budget": 2},
        plugins=["recorder"],
    )
    await run_batch(config, tmp_path / "out")
    (record,) = records(tmp_path / "out")
    first, second = record["attempts"]["each"]
    assert first["provenance"] == {
        "kind": "stopped_early",
        "stopped_by": ["at most 3 words"],
        "chars": len("one two three four"),
        "tokens": 4,
    }
    assert first["stopped_early"] is True and second["provenance"] == {"kind": "whole"}
    events = [json.loads(line) for line in (tmp_path / "out" / "events.jsonl").open()]
    (end,) = [e["payload"] for e in events if e["hook"] == "sampling_loop_end"]
    assert [a["provenance"] for a in end["attempts"]] == [first["provenance"], {"kind": "whole"}]
    events_file = str(tmp_path / "out" / "events.jsonl")
    shown = CliRunner().invoke(app, ["trace", "show", events_file, "--json"])
    (call,) = json.loads(shown.output)
    assert [a["provenance"] for a in call["attempts"]] == [first["provenance"], {"kind": "whole"}]
    table = CliRunner().invoke(app, ["trace", "show", events_file])
    assert "stopped early by at most 3 words" in " ".join(table.output.split())  # wrapped
    lanes = run_data(tmp_path / "out")["prompts"][0]["lanes"]
    assert lanes[0]["steps"][0]["provenance"] == first["provenance"]


# -- one failure label ---------------------------------------------------------------------


class Stopper:
    @hookimpl
    def sampling_iteration(self, payload: Any) -> None:
        raise StopSampling("over budget: 3 of 2 dollars")


async def test_one_failure_label_in_the_record_the_loop_end_and_the_result(
    tmp_path: Path,
) -> None:
    data = write_dataset(tmp_path / "d.jsonl", 2)
    config = write_config(
        tmp_path / "c.yaml",
        data,
        backend={"kind": "scripted", "replies": ["far too many words for this"]},
        requirements=[{"max_words": 3}],
        plugins=["recorder"],
    )
    await run_batch(config, tmp_path / "out")
    events = [json.loads(line) for line in (tmp_path / "out" / "events.jsonl").open()]
    ends = {
        e["payload"]["sampling_id"]: e["payload"]
        for e in events
        if "failure_reason" in e.get("payload", {})
    }
    for record in records(tmp_path / "out"):
        assert record["reason"] == "unmet requirements: at most 3 words"
        assert ends[record["sampling_id"]]["failure_reason"] == record["reason"]


async def test_a_stop_keeps_the_reason_the_plugin_gave() -> None:
    s = sampler(ScriptedBackend(["x"]))
    s.plugins.register(Stopper(), "cost-cap")
    result = await s.sample("q", requirements=[Requirement("never", lambda t: False)])
    assert result.failure_reason == "stopped by plugin cost-cap: over budget: 3 of 2 dollars"


# -- one attempt shape, one lenient reader -------------------------------------------------


async def test_sample_json_and_a_record_write_an_attempt_in_one_shape(tmp_path: Path) -> None:
    result = await sampler(ScriptedBackend(["a b c d e", "ok"])).sample(
        "q", requirements=[max_words(3)], loop_budget=2
    )
    shown = result_as_dict(result)["attempts"]
    assert shown == [
        AttemptEntry.of_attempt(a, result.attempts[0].messages).as_json() for a in result.attempts
    ]
    assert [AttemptEntry.read(a) for a in shown] == [
        AttemptEntry.of_attempt(a, result.attempts[0].messages) for a in result.attempts
    ]
    assert (
        shown[0]["unmet"] == ["at most 3 words"] and shown[0]["validations"][0]["passed"] is False
    )


OLD = {  # a record written before sampling ids, token counts per attempt and provenance
    "seq": 3,
    "key": "p1",
    "content_hash": "h",
    "status": "failed",
    "reason": "The answer has 9 words; it must have at most 8.",
    "failed_requirements": ["at most 8 words"],
    "attempts": {
        "used": 2,
        "each": [
            {"subsample": 0, "attempt": 1, "passed": False, "stopped_early": True, "text": "x"},
            {"subsample": 0, "attempt": 2, "passed": False, "cached": True, "text": "y"},
            "not an attempt",
            {"subsample": 0, "attempt": 3, "passed": False, "error": "BackendError: 500"},
        ],
    },
    "usage": {"input_tokens": 4, "output_tokens": None},
    "made_by_a_newer_version": {"kept": True},
}


def test_the_reader_takes_every_shape_runs_wrote() -> None:
    record = read_record(OLD)
    assert isinstance(record, RunRecord) and record.sampling_id is None
    first, second, error = record.entries()
    assert first.provenance.stopped_by == ("?",) and first.input_tokens is None
    assert second.provenance.cached and second.provenance.whole
    assert error.error == "BackendError: 500" and not error.completed
    row = record.row()
    assert (row.attempts, row.passes, row.stopped_early, row.output_tokens) == (2, 0, 1, None)
    assert record.samples() == (0, 0, False, 0)  # its one subsample ended by an error
    assert record.as_json()["made_by_a_newer_version"] == {"kept": True}


@pytest.mark.parametrize(
    "damage",
    [
        {"key": 3},
        {"status": "fine"},
        {"seq": "3"},
        {"attempts": {"used": "2"}},
        {"usage": {"input_tokens": 1.5}},
        {"failed_requirements": [1]},
    ],
)
def test_a_line_without_what_every_reader_needs_is_not_a_record(damage: dict[str, Any]) -> None:
    assert read_record({**OLD, **damage}) is None


async def test_the_trace_gives_the_records_failure_label(tmp_path: Path) -> None:
    from structlog.testing import capture_logs

    data = write_dataset(tmp_path / "d.jsonl", 1)
    config = write_config(
        tmp_path / "c.yaml",
        data,
        backend={"kind": "scripted", "replies": ["far too many words for this"]},
        requirements=[{"max_words": 3}],
        plugins=["tracing"],
    )
    with capture_logs() as logs:
        await run_batch(config, tmp_path / "out")
    (record,) = records(tmp_path / "out")
    (end,) = [e for e in logs if e["event"] == "sampling.loop.end"]
    (prompt,) = [e for e in logs if e["event"] == "prompt.end"]
    assert end["failure_reason"] == prompt["failure_reason"] == record["reason"]


async def test_a_result_says_why_its_cancelled_attempts_were_cancelled() -> None:
    others = anyio.Event()
    waiting = 0

    async def last_to_answer_wins(request: Any) -> str:
        nonlocal waiting
        if request.iteration.subsample_index == 0:
            await others.wait()  # until both siblings are in flight
            return "ok"
        waiting += 1
        if waiting == 2:
            others.set()
        await anyio.sleep_forever()
        return "never"

    result = await sampler(ScriptedBackend(last_to_answer_wins)).sample(
        "q", concurrency_budget=3, loop_budget=1
    )
    assert result.cancelled == 2 and result.cancelled_because == "sibling_succeeded"
    assert result_as_dict(result)["cancelled_because"] == "sibling_succeeded"
    whole = await sampler(ScriptedBackend(["ok"])).sample("q")
    assert whole.cancelled == 0 and whole.cancelled_because is None


async def test_sampling_iteration_and_the_trace_carry_the_provenance() -> None:
    from structlog.testing import capture_logs

    from builtin_plugins.tracing import TracingPlugin

    seen: list[Any] = []

    class Seen:
        @hookimpl
        def sampling_iteration(self, payload: Any) -> None:
            seen.append(payload.provenance)

    with capture_logs() as logs:
        await sampler(ScriptedBackend(["a b c d e", "ok"]), Seen(), TracingPlugin()).sample(
            "q", requirements=[max_words(3)], loop_budget=2
        )
    assert [p.kind for p in seen] == ["stopped_early", "whole"]
    iterations = [e for e in logs if e["event"] == "sampling.iteration"]
    assert [e["provenance"]["kind"] for e in iterations] == ["stopped_early", "whole"]


def test_a_loop_end_dump_writes_each_attempt_in_the_one_shape(tmp_path: Path) -> None:
    from builtin_plugins.recorder import RecorderPlugin

    path = tmp_path / "events.jsonl"
    with RecorderPlugin(path, capture_content=True) as recorder:
        result = sampler(ScriptedBackend(["a b c d e", "ok"]), recorder).sample_sync(
            "q", requirements=[max_words(3)], loop_budget=2
        )
    events = [json.loads(line) for line in path.open()]
    (end,) = [e["payload"] for e in events if e["hook"] == "sampling_loop_end"]
    shown = result_as_dict(result)["attempts"]  # sample --json
    for entry in shown:
        entry.pop("messages", None)  # the dump leaves the messages to the generation events
    assert end["attempts"] == shown
