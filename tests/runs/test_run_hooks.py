"""The run hooks (``run_start``, ``prompt_start``, ``prompt_end``, ``run_end``) on the local
executor: order, exactly once, what they carry, resume, interruption, faulty plugins."""

from __future__ import annotations

import json
import signal
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from hook_specs import HookName, StopSampling, background, hookimpl
from sampling_core import GenerationRequest, ScriptedBackend
from sampling_core.runs import run_batch
from sampling_core.runs.execution.run_hooks import INTERRUPTED, interrupted_record
from sampling_core.runs.reports.report import build_report
from sampling_core.runs.store.record_writer import RecordWriter
from sampling_core.testing import HookRecorder
from tests.support.runs_helpers import check_order, records, write_config, write_dataset

pytestmark = pytest.mark.anyio

H = HookName
RUN = set(HookName.run())


async def test_each_prompt_is_announced_once_around_its_call(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "data.jsonl", 9, zebra_every=3)
    config = write_config(
        tmp_path / "run.yaml",
        dataset,
        backend={"kind": "scripted", "replies": ["a short answer"], "latency_s": 0.002},
        budgets={"loop_budget": 2, "concurrency_budget": 2},
        run={"max_concurrent_prompts": 3},
    )
    seen = HookRecorder()
    out = tmp_path / "run"
    await run_batch(config, out, plugins=[seen])
    keys = {f"p{i}" for i in range(9)}
    check_order(seen, keys)
    [start] = seen.payloads(H.RUN_START)
    meta = json.loads((out / "meta.json").read_text())
    assert (start.run_dir, start.session, start.resumed, start.executor) == (
        str(out),
        1,
        False,
        "local",
    )
    assert (start.total, start.done) == (9, 0)
    assert start.settings == meta["settings"]["values"]
    assert start.config["requirements"] == [{"max_words": 5}]
    assert start.config["budgets"]["loop_budget"] == 2
    # each prompt's line and record, as read and as written
    rows = {p.key: p.row for p in seen.payloads(H.PROMPT_START)}
    assert rows["p3"] == {
        "id": "p3",
        "prompt": "Question number 3?",
        "require": [{"contains": "zebra"}],
    }
    written = {r["key"]: r for r in records(out)}
    assert {p.key: p.record for p in seen.payloads(H.PROMPT_END)} == written
    # the calls know their prompt
    for payload in seen.payloads(H.SAMPLING_LOOP_END):
        assert written[payload.prompt_key]["sampling_id"] == payload.sampling_id
    [end] = seen.payloads(H.RUN_END)
    report = build_report(out).as_dict()
    assert end.totals == report["totals"] and end.totals["failed"] == 3
    assert (end.interrupted, end.error, end.pass_at_k, end.pass_hat_k) == (False, None, None, None)
    assert end.elapsed_s > 0


async def test_prompt_end_comes_once_the_record_is_in_the_file(tmp_path: Path) -> None:
    """With records kept in memory (``flush_every``), a prompt is announced when its record
    is flushed, and its line is in records.jsonl then."""
    out = tmp_path / "run"
    found: list[tuple[str, bool]] = []

    class ReadsTheFile:
        @hookimpl
        def prompt_end(self, payload: Any) -> None:
            keys = {json.loads(line)["key"] for line in (out / "records.jsonl").open()}
            found.append((payload.key, payload.key in keys))

    dataset = write_dataset(tmp_path / "data.jsonl", 7)
    config = write_config(
        tmp_path / "run.yaml",
        dataset,
        run={"max_concurrent_prompts": 2, "flush_every": 3, "flush_interval_s": 600},
    )
    seen = HookRecorder()
    await run_batch(config, out, plugins=[ReadsTheFile(), seen])
    assert sorted(found) == [(f"p{i}", True) for i in range(7)]
    check_order(seen, {f"p{i}" for i in range(7)})


async def test_a_resume_announces_only_what_it_runs_and_says_what_was_done(
    tmp_path: Path,
) -> None:
    dataset = write_dataset(tmp_path / "data.jsonl", 8)
    config = write_config(tmp_path / "run.yaml", dataset, run={"max_concurrent_prompts": 1})
    out = tmp_path / "run"
    await run_batch(config, out, plugins=[HookRecorder()])  # a run's plugins are kept on resume
    kept = (out / "records.jsonl").read_text().splitlines(keepends=True)[:3]
    (out / "records.jsonl").write_text("".join(kept))  # as if killed after 3 records
    done = {json.loads(line)["key"] for line in kept}
    seen = HookRecorder()
    await run_batch(config, out, resume=True, plugins=[seen])
    check_order(seen, {f"p{i}" for i in range(8)} - done)
    [start], [end] = seen.payloads(H.RUN_START), seen.payloads(H.RUN_END)
    assert (start.session, start.resumed, start.total, start.done) == (2, True, 8, 3)
    assert {p.session for p in seen.payloads(H.PROMPT_END)} == {2}
    assert end.totals["done"] == 8 and end.totals["sessions"] == 2
    seen.clear()  # nothing left: a session that runs no prompt still starts and ends
    await run_batch(config, out, resume=True, plugins=[seen])
    assert [e.hook for e in seen] == [H.RUN_START, H.RUN_END]
    assert (seen.events[0]["done"], seen.events[0]["session"]) == (8, 3)


async def test_a_fatal_error_still_ends_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = RecordWriter.append_sized
    appended: list[str] = []

    def failing(self: RecordWriter, record: dict[str, Any]) -> tuple[dict[str, Any], int]:
        if len(appended) == 3:
            raise OSError(28, "No space left on device")
        appended.append(record["key"])
        return real(self, record)

    monkeypatch.setattr(RecordWriter, "append_sized", failing)
    dataset = write_dataset(tmp_path / "data.jsonl", 6)
    config = write_config(tmp_path / "run.yaml", dataset, run={"max_concurrent_prompts": 1})
    seen = HookRecorder()
    out = tmp_path / "run"
    with pytest.raises(ExceptionGroup) as caught:  # from the task group it happened in
        await run_batch(config, out, plugins=[seen])
    assert caught.group_contains(OSError, match="No space left")
    [end] = seen.payloads(H.RUN_END)
    assert end.interrupted and "OSError" in end.error and "No space left" in end.error
    assert seen.events[-1].hook is H.RUN_END
    ends = [(p.key, p.record["status"]) for p in seen.payloads(H.PROMPT_END)]
    # p3's record could not be written: the session ended first
    assert ends == [("p0", "ok"), ("p1", "ok"), ("p2", "ok"), ("p3", INTERRUPTED)]
    assert [r["key"] for r in records(out)] == appended == ["p0", "p1", "p2"]
    assert end.totals["done"] == 3


@pytest.mark.usefixtures("ctrl_c_raises")
def test_ctrl_c_ends_the_run_as_interrupted_with_its_records_intact(tmp_path: Path) -> None:
    """SIGINT (Ctrl-C) during a run: ``run_end`` says ``interrupted``, every prompt with a
    record had its ``prompt_end`` with it, and every other prompt started its ``prompt_end``
    as interrupted."""

    class CtrlC:
        def __init__(self) -> None:
            self.ended = 0

        @hookimpl
        def prompt_end(self, payload: Any) -> None:
            self.ended += 1
            if self.ended == 4:
                signal.raise_signal(signal.SIGINT)

    dataset = write_dataset(tmp_path / "data.jsonl", 20)
    config = write_config(
        tmp_path / "run.yaml",
        dataset,
        backend={"kind": "scripted", "replies": ["a short answer"], "latency_s": 0.01},
        run={"max_concurrent_prompts": 3},
    )
    seen = HookRecorder()
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        anyio.run(lambda: run_batch(config, out, plugins=[CtrlC(), seen]))
    [end] = seen.payloads(H.RUN_END)
    assert end.interrupted and end.error is None
    assert seen.events[-1].hook is H.RUN_END
    written = [r["key"] for r in records(out)]
    assert 4 <= len(written) < 20 and len(set(written)) == len(written)
    ends = seen.payloads(H.PROMPT_END)
    assert sorted(p.key for p in ends if p.record["status"] != INTERRUPTED) == sorted(written)
    started = [p.key for p in seen.payloads(H.PROMPT_START)]
    assert set(written) <= set(started) and len(set(started)) == len(started)
    assert sorted(p.key for p in ends) == sorted(started)  # the ones in flight too
    assert end.totals["done"] == len(written)
    progress = json.loads((out / "progress.json").read_text())
    assert progress["state"] == "interrupted"


async def test_a_prompt_in_flight_when_the_session_ends_gets_its_prompt_end(
    tmp_path: Path,
) -> None:
    """Every ``prompt_start`` has one ``prompt_end``: one still sampling when the session is
    cancelled gets it (before ``run_end``) with a record that says it was interrupted."""
    stuck_started = anyio.Event()
    two_ended = anyio.Event()

    async def reply(request: GenerationRequest) -> str:
        if "number 1?" in str(request.messages[-1]["content"]):
            stuck_started.set()
            await anyio.sleep_forever()  # p1 is in flight until the session ends
        return "a short answer"

    class TwoEnded:
        ended = 0

        @hookimpl
        def prompt_end(self, payload: Any) -> None:
            TwoEnded.ended += 1
            if TwoEnded.ended == 2:
                two_ended.set()

    dataset = write_dataset(tmp_path / "data.jsonl", 3)
    config = write_config(tmp_path / "run.yaml", dataset, run={"max_concurrent_prompts": 2})
    seen = HookRecorder()
    out = tmp_path / "run"
    async with anyio.create_task_group() as group:
        group.start_soon(
            partial(
                run_batch, config, out, backend=ScriptedBackend(reply), plugins=[seen, TwoEnded()]
            )
        )
        await stuck_started.wait()
        await two_ended.wait()  # p0 and p2 are done, p1 still samples
        group.cancel_scope.cancel()
    check_order(seen, {"p0", "p1", "p2"})  # one start and one end each, run_end last
    ends = {p.key: p.record for p in seen.payloads(H.PROMPT_END)}
    assert ends["p1"] == interrupted_record("p1") and ends["p1"]["status"] == INTERRUPTED
    statuses = {p.key: p.status for p in seen.payloads(H.PROMPT_END)}
    assert statuses == {"p0": "ok", "p1": INTERRUPTED, "p2": "ok"}  # also in events.jsonl
    assert "--resume" in ends["p1"]["reason"]
    assert sorted(r["key"] for r in records(out)) == ["p0", "p2"]
    [end] = seen.payloads(H.RUN_END)
    assert end.interrupted


class Faulty:
    """Raises in every run hook (StopSampling too), inline."""

    @hookimpl
    def run_start(self, payload: Any) -> None:
        raise RuntimeError("run_start broke")

    @hookimpl
    def prompt_start(self, payload: Any) -> None:
        raise StopSampling("a run hook cannot stop a call")

    @hookimpl
    def prompt_end(self, payload: Any) -> None:
        raise ValueError("prompt_end broke")

    @hookimpl
    def run_end(self, payload: Any) -> None:
        raise RuntimeError("run_end broke")


class SlowAndFaultyInTheBackground:
    """A ``@background`` observer of every run hook that is slow, and raises on odd prompts."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []

    def _note(self, payload: Any) -> None:
        import time

        time.sleep(0.01)  # slow: the run must not wait for it (nor lose anything to it)
        self.seen.append((payload.hook.value, getattr(payload, "key", None)))

    @hookimpl
    @background
    def run_start(self, payload: Any) -> None:
        self._note(payload)
        raise RuntimeError("background run_start broke")

    @hookimpl
    @background
    def prompt_start(self, payload: Any) -> None:
        self._note(payload)

    @hookimpl
    @background
    def prompt_end(self, payload: Any) -> None:
        self._note(payload)
        if int(payload.key[1:]) % 2:
            raise ValueError(f"background prompt_end broke on {payload.key}")

    @hookimpl
    @background
    def run_end(self, payload: Any) -> None:
        self._note(payload)


async def test_raising_and_slow_run_hook_plugins_lose_no_record(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "data.jsonl", 10, zebra_every=5)
    config = write_config(tmp_path / "run.yaml", dataset, run={"max_concurrent_prompts": 4})
    slow = SlowAndFaultyInTheBackground()
    seen = HookRecorder()
    out = tmp_path / "run"
    summary = await run_batch(config, out, plugins=[Faulty(), slow, seen])
    assert summary.complete and (summary.ok, summary.failed) == (8, 2)
    assert sorted(r["key"] for r in records(out)) == sorted(f"p{i}" for i in range(10))
    check_order(seen, {f"p{i}" for i in range(10)})  # StopSampling stopped no call
    # every background event was delivered before run_batch returned, in firing order
    assert slow.seen == [(e.name, e.fields.get("key")) for e in seen if e.hook in RUN]


async def test_hook_tracing_shows_the_run_hooks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SAMPLEHOOKS_TRACE_HOOKS", "1")
    dataset = write_dataset(tmp_path / "data.jsonl", 2)
    config = write_config(tmp_path / "run.yaml", dataset, run={"max_concurrent_prompts": 1})
    await run_batch(config, tmp_path / "run", plugins=[HookRecorder()])
    lines = capsys.readouterr().err.splitlines()
    run_dir = tmp_path / "run"
    assert f"samplehooks: run_start -> HookRecorder (run_dir={run_dir} session=1)" in lines
    assert f"samplehooks: prompt_end -> HookRecorder (run_dir={run_dir} session=1 key=p1)" in lines
    starts = [line for line in lines if "sampling_loop_start -> HookRecorder" in line]
    assert [line.split("prompt_key=")[1] for line in starts] == ["p0)", "p1)"]


async def test_run_end_fires_when_the_report_cannot_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from structlog.testing import capture_logs

    from sampling_core.runs.reports.run_reading import RunReading

    def unreadable(self: Any) -> Any:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(RunReading, "report", unreadable)
    dataset = write_dataset(tmp_path / "data.jsonl", 2)
    seen = HookRecorder()
    with capture_logs() as logs:
        summary = await run_batch(
            write_config(tmp_path / "run.yaml", dataset), tmp_path / "run", plugins=[seen]
        )
    assert summary.complete and len(records(tmp_path / "run")) == 2
    [end] = seen.payloads(H.RUN_END)
    assert (end.totals, end.pass_at_k, end.interrupted) == ({}, None, False)
    [warning] = [e for e in logs if e["event"] == "run.report_unreadable"]
    assert "Input/output error" in warning["error"]
