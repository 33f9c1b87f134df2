"""The recorder writes in the background: its file is complete and in hook order whenever
the engine promises every background event delivered, and a slow disk does not slow the
call (until the background queue is full)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import IO, Any

import anyio
import pytest

from builtin_plugins.recorder import EventLines, RecorderPlugin
from sampling_core import Sampler, ScriptedBackend
from sampling_core.runs import run_batch
from sampling_core.testing import HookRecorder
from tests.support.runs_helpers import write_config, write_dataset

BUDGETS = {"loop_budget": 3, "concurrency_budget": 2}


def never(text: str) -> bool:
    """never passes"""
    return False


def fired(recorder: HookRecorder) -> list[tuple[str, str, Any, Any]]:
    """Each hook call, as it fired (the recorder plugin writes every one): (hook, call,
    subsample, attempt)."""
    return [
        (e.name, e.sampling_id, e.fields.get("subsample_index"), e.fields.get("attempt"))
        for e in recorder
    ]


def written(path: Path) -> list[tuple[str, str, Any, Any]]:
    """Each line of the recorder's file, in file order, as :func:`fired` gives them."""
    events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [
        (
            e["hook"],
            e["payload"].get("sampling_id"),  # none for a run hook
            e["payload"].get("subsample_index"),
            e["payload"].get("attempt"),
        )
        for e in events
    ]


def make(path: Path, **kwargs: Any) -> tuple[Sampler, RecorderPlugin, HookRecorder]:
    recorder, seen = RecorderPlugin(path), HookRecorder()
    backend = ScriptedBackend(["x"], latency=kwargs.pop("latency", 0.0))
    sampler = Sampler(backend, plugins=[recorder, seen], load_entrypoints=False, **kwargs)
    return sampler, recorder, seen


class StalledDisk:
    """A disk that stopped: writes wait until :attr:`release` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.writing = threading.Event()  # a write has begun (and waits)
        self.opened = 0

    def wrap(self, real: IO[str]) -> Any:
        disk = self
        self.opened += 1

        class StalledFile:
            def write(self, text: str) -> int:
                disk.writing.set()
                disk.release.wait(30)
                return real.write(text)

            def flush(self) -> None:
                real.flush()

            def close(self) -> None:
                real.close()

        return StalledFile()


@pytest.fixture
def stalled_disk(monkeypatch: pytest.MonkeyPatch) -> StalledDisk:
    """Every file the recorder opens from now on is on a :class:`StalledDisk`."""
    disk = StalledDisk()
    real_open = EventLines.open_file
    monkeypatch.setattr(EventLines, "open_file", lambda self: disk.wrap(real_open(self)))
    return disk


def test_complete_and_in_hook_order_when_sample_sync_returns(tmp_path: Path) -> None:
    sampler, recorder, seen = make(tmp_path / "events.jsonl")
    for _ in range(3):
        sampler.sample_sync("q", requirements=[never], **BUDGETS)
    # start, end; pre/chunk/post/validate/iteration (streamed: both listen to chunks); repairs;
    # the call hooks (one sampling_call, a generation_call per attempt)
    assert len(seen) == 3 * (2 + 6 * 5 + 4 + 1 + 6)
    assert written(recorder.path) == fired(seen)
    assert recorder.lines_written == len(fired(seen)) == 3 * (2 + 6 * 5 + 4 + 1 + 6)


@pytest.mark.anyio
async def test_complete_and_in_hook_order_when_async_with_ends(tmp_path: Path) -> None:
    sampler, recorder, seen = make(tmp_path / "events.jsonl", latency=0.001)
    async with sampler, anyio.create_task_group() as group:
        for _ in range(5):  # concurrent calls interleave in one file
            group.start_soon(lambda: sampler.sample("q", requirements=[never], **BUDGETS))
    assert sampler.background.pending() == 0
    assert written(recorder.path) == fired(seen)
    assert len({call for _, call, _, _ in written(recorder.path)}) == 5


@pytest.mark.anyio
async def test_a_stalled_disk_does_not_hold_up_the_call(
    tmp_path: Path, stalled_disk: StalledDisk
) -> None:
    sampler, recorder, seen = make(tmp_path / "events.jsonl")
    result = await sampler.sample("q", requirements=[never], **BUDGETS)
    # the call returned while the disk had taken nothing: the writes were not waited for
    assert result.iterations_used == 6
    assert recorder.lines_written == 0
    assert sampler.background.pending() >= 1
    stalled_disk.release.set()
    await sampler.aclose()
    assert written(recorder.path) == fired(seen)


@pytest.mark.anyio
async def test_a_stalled_disk_holds_the_call_once_the_queue_is_full(
    tmp_path: Path, stalled_disk: StalledDisk
) -> None:
    sampler, recorder, seen = make(tmp_path / "events.jsonl", background_queue_size=2)
    done = anyio.Event()

    async def call() -> None:
        await sampler.sample("q", requirements=[never], loop_budget=12)
        done.set()

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        await anyio.to_thread.run_sync(stalled_disk.writing.wait, 30)
        await anyio.wait_all_tasks_blocked()
        assert not done.is_set()  # waiting for room: 12 attempts make 13 background events
        assert sampler.background.pending() <= 3  # two queued, one being written
        assert recorder.lines_written == 0
        stalled_disk.release.set()
    await sampler.aclose()
    assert written(recorder.path) == fired(seen)  # nothing dropped


@pytest.mark.anyio
async def test_complete_and_in_hook_order_when_a_batch_run_returns(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "data.jsonl", 12)
    config = write_config(
        tmp_path / "run.yaml",
        dataset,
        backend={"kind": "scripted", "replies": ["a short answer"], "latency_s": 0.001},
        requirements=[{"max_words": 1}],
        budgets={"loop_budget": 2, "concurrency_budget": 2},
        plugins=["recorder"],
        run={"max_concurrent_prompts": 4},
    )
    seen = HookRecorder()
    out = tmp_path / "run"
    await run_batch(config, out, plugins=[seen])
    # per prompt: its start and end, the call's start and end, 4 x pre/post/validate/
    # iteration and 2 chunks (the answer is stopped early at its second word), 2 repairs;
    # and the session's run_start and run_end
    assert len(seen) == 12 * (2 + 2 + 4 * 6 + 2 + 1 + 4) + 2
    assert written(out / "events.jsonl") == fired(seen)


def test_complete_at_interpreter_exit_without_aclose(tmp_path: Path) -> None:
    events, expected = tmp_path / "events.jsonl", tmp_path / "expected.json"
    script = textwrap.dedent(
        f"""
        import asyncio, atexit, json, threading
        from builtin_plugins.recorder import EventLines, RecorderPlugin
        from sampling_core import Sampler, ScriptedBackend
        from sampling_core.testing import HookRecorder

        exiting = threading.Event()
        real = EventLines.write_noted
        def held(self):  # nothing is written before the interpreter begins to exit
            exiting.wait(30)
            real(self)
        EventLines.write_noted = held

        seen = HookRecorder()
        sampler = Sampler(
            ScriptedBackend(["x"]),
            plugins=[RecorderPlugin({str(events)!r}), seen],
            load_entrypoints=False,
        )
        for _ in range(3):
            asyncio.run(sampler.sample("q", requirements=[lambda t: False], loop_budget=4))
        assert sampler.background.pending() > 0, "nothing left for the exit to deliver"
        rows = [
            (e.name, e.sampling_id, e.fields.get("subsample_index"), e.fields.get("attempt"))
            for e in seen
        ]
        with open({str(expected)!r}, "w") as out:
            json.dump(rows, out)
        # atexit runs the last registered first: this, then the sampler's drain
        atexit.register(exiting.set)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    rows = [tuple(row) for row in json.loads(expected.read_text())]
    assert len(rows) == 3 * (2 + 4 * 5 + 3 + 1 + 4)  # one chunk per answer; the call hooks
    assert written(events) == rows
