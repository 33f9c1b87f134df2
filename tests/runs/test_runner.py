"""The batch runner: prompts at once, plugins, flushing on a timer, fsync, the summary."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import pytest

from hook_specs import background, hookimpl
from sampling_core import ScriptedBackend
from sampling_core.runs import run_batch, summarize
from sampling_core.runs.store import store as store_module
from tests.support.runs_helpers import records, write_config, write_dataset

pytestmark = pytest.mark.anyio


async def test_prompts_run_at_once_up_to_the_limit(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 9)
    state = {"now": 0, "peak": 0}

    async def reply(request):
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        await anyio.sleep(0.02)
        state["now"] -= 1
        return "fine"

    config = write_config(tmp_path / "a.yaml", dataset, run={"max_concurrent_prompts": 3})
    await run_batch(config, tmp_path / "out", backend=ScriptedBackend(reply))
    assert state["peak"] == 3


class LoopEnds:
    """Counts the end of every sample() call the batch makes."""

    def __init__(self) -> None:
        self.ends: list[bool] = []

    @hookimpl
    def sampling_loop_end(self, payload) -> None:
        self.ends.append(payload.success)


async def test_plugins_see_every_prompt_and_the_recorder_writes_into_the_run(
    tmp_path: Path,
) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 5)
    config = write_config(tmp_path / "a.yaml", dataset, plugins=["recorder", "tracing"])
    watcher = LoopEnds()
    await run_batch(config, tmp_path / "out", plugins=[watcher])
    assert watcher.ends == [True] * 5
    events = [json.loads(line) for line in (tmp_path / "out" / "events.jsonl").open()]
    assert sum(e["hook"] == "sampling_loop_end" for e in events) == 5


class SlowBackgroundWatcher:
    """A @background observer slower than the run: its events are still all delivered."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @background
    @hookimpl
    def sampling_loop_end(self, payload) -> None:
        time.sleep(0.02)
        self.seen.append(payload.sampling_id)


async def test_a_run_delivers_every_background_event_before_it_returns(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 6)
    config = write_config(tmp_path / "a.yaml", dataset)
    watcher = SlowBackgroundWatcher()
    await run_batch(config, tmp_path / "out", plugins=[watcher])
    ids = {r["sampling_id"] for r in records(tmp_path / "out")}
    assert len(ids) == 6 and sorted(watcher.seen) == sorted(ids)


async def test_a_bad_plugin_name_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    from sampling_core.runs import ConfigError

    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    config = write_config(tmp_path / "a.yaml", dataset, plugins=["no_such_plugin"])
    with pytest.raises(ConfigError, match=r"plugins: .*no_such_plugin"):
        await run_batch(config, tmp_path / "out")
    assert not (tmp_path / "out").exists()


async def test_records_are_flushed_on_the_timer(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 3)
    out = tmp_path / "out"

    async def reply(request):
        if "number 2?" not in request.prompt:
            return "fine"
        # the last prompt waits until the first two records reached the file
        with anyio.move_on_after(10):
            while len(records(out)) < 2:
                await anyio.sleep(0.01)
            return "fine"
        return "the records never reached the file"

    config = write_config(
        tmp_path / "a.yaml",
        dataset,
        run={"max_concurrent_prompts": 1, "flush_every": 1000, "flush_interval_s": 0.02},
    )
    await run_batch(config, out, backend=ScriptedBackend(reply))
    assert {r["key"]: r["status"] for r in records(out)}["p2"] == "ok"


@pytest.mark.parametrize("fsync", [True, False])
async def test_fsync_is_used_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync: bool
) -> None:
    calls: list[int] = []
    real = store_module.os.fsync
    monkeypatch.setattr(store_module.os, "fsync", lambda fd: calls.append(fd) or real(fd))
    dataset = write_dataset(tmp_path / "d.jsonl", 3)
    config = write_config(tmp_path / "a.yaml", dataset, run={"fsync": fsync})
    await run_batch(config, tmp_path / "out")
    directories = 2  # a new run directory and its parent are synced once
    # one per record flushed, and one per its texts (texts.jsonl, written first)
    assert len(calls) - directories == (6 if fsync else 0)


async def test_the_summary_counts_attempts_tokens_and_reasons(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", 4, zebra_every=2)  # p0, p2 need zebra
    config = write_config(tmp_path / "a.yaml", dataset, budgets={"loop_budget": 3})
    replies = {"p0": ["no"] * 3, "p1": ["ok"], "p2": ["no", "zebra"], "p3": ["ok"]}

    def reply(request):
        key = "p" + request.prompt.split()[-1].rstrip("?")
        return replies[key].pop(0)

    summary = await run_batch(config, tmp_path / "out", backend=ScriptedBackend(reply))
    assert (summary.ok, summary.failed) == (3, 1)
    assert summary.attempts_histogram == {1: 2, 2: 1, 3: 1}
    assert summary.output_tokens == 7
    assert summary.success_rate == 0.75
    assert summary.top_reasons == [("contains 'zebra'", 1)]
    failed = next(r for r in records(tmp_path / "out") if r["status"] == "failed")
    assert failed["failed_requirements"] == ["contains 'zebra'"]
    assert failed["reason"] == "unmet requirements: contains 'zebra'"  # the one failure label
    assert failed["attempts"]["each"][-1]["failed"] == ["The answer must contain 'zebra'."]
    text = summary.render()
    assert "4 of 4 prompts done (complete)" in text
    assert "success rate: 75.0%" in text and "Tokens:" in text and "Wall time:" in text
    assert "Unmet requirements (prompts not ok):\n      1  contains 'zebra'" in text
    assert summarize(tmp_path / "out").render() == text


def test_the_progress_bar_draws_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from io import StringIO

    from rich.console import Console

    from sampling_core.runs.execution.progress import ProgressDisplay

    screen = StringIO()
    display = ProgressDisplay(
        "on", total=3, console=Console(file=screen, force_terminal=True, width=100)
    )
    display.start({"ok": 1})
    display.advance({"ok": 2, "failed": 1})
    display.stop()
    assert "sampling" in screen.getvalue() and "3/3" in screen.getvalue()
    assert "failed 1" in screen.getvalue()
    monkeypatch.setattr("sys.stderr", StringIO())
    assert ProgressDisplay("auto", total=3).enabled is False
    assert ProgressDisplay("off", total=3).enabled is False


def test_the_progress_plugin_gets_one_bar_over_the_prompts_to_run(tmp_path: Path) -> None:
    from builtin_plugins.progress import ProgressPlugin
    from builtin_plugins.recorder import RecorderPlugin
    from builtin_plugins.tracing import TracingPlugin
    from sampling_core.hooks.registry import PluginRegistry
    from sampling_core.runs.config.components import plugin_specs
    from sampling_core.runs.config.config import PluginEntry

    entries = [PluginEntry.model_validate(n) for n in ("tracing", "progress", "recorder")]
    specs = plugin_specs(entries, tmp_path / "e.jsonl", total=7)
    # each plugin is made by its entry point and told about the run through for_run
    assert [name for name, _ in specs] == ["tracing", "progress", "recorder"]
    assert isinstance(specs[0][1], TracingPlugin)
    assert isinstance(specs[1][1], ProgressPlugin) and specs[1][1].total == 7
    assert isinstance(specs[2][1], RecorderPlugin)
    assert specs[2][1].path == tmp_path / "e.jsonl"
    registry = PluginRegistry()
    for name, plugin in specs:
        assert registry.add(plugin, name) == name
    assert registry.get("progress") is specs[1][1]
    assert registry.get("recorder") is specs[2][1]


def test_a_config_file_is_checked_against_the_kinds_the_run_is_given(tmp_path: Path) -> None:
    from sampling_core import Requirement
    from sampling_core.kinds import collect_kinds
    from sampling_core.runs import ConfigError, run_batch_sync

    kinds = collect_kinds()
    kinds.register(
        "requirement",
        "shouts",
        lambda value=True: Requirement("shouts", lambda text: text.isupper() is value),
        plugin="tests",
    )
    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    config = write_config(tmp_path / "run.yaml", dataset, requirements=[{"shouts": True}])
    summary = run_batch_sync(config, tmp_path / "out", kinds=kinds)
    assert (summary.done, summary.failed) == (2, 2)  # "a short answer" does not shout
    with pytest.raises(ConfigError, match="shouts"):  # unknown to the installed plugins
        run_batch_sync(config, tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_a_config_object_is_checked_against_the_kinds_before_anything_is_written(
    tmp_path: Path,
) -> None:
    """A ``RunConfig`` given in code (not read from a file) has its kinds checked too."""
    from sampling_core.runs import ConfigError, load_config, run_batch_sync

    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    config = load_config(write_config(tmp_path / "run.yaml", dataset))
    unknown = config.model_copy(
        update={"backend": config.backend.model_copy(update={"kind": "no_such_backend"})}
    )
    with pytest.raises(ConfigError, match=r"backend.*no_such_backend"):
        run_batch_sync(unknown, tmp_path / "out")
    assert not (tmp_path / "out").exists()


async def test_a_sessions_wall_time_includes_starting_its_executor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Ray cluster and its workers' backends start before the session's records; the
    # local executor builds its backend there too. Starting takes 100 s on this clock.
    from sampling_core.runs.execution import runner

    real, offset = time.perf_counter, [0.0]
    monkeypatch.setattr(time, "perf_counter", lambda: real() + offset[0])
    build = runner.build_backend

    def slow_to_start(*args, **kwargs):
        offset[0] += 100.0
        return build(*args, **kwargs)

    monkeypatch.setattr(runner, "build_backend", slow_to_start)
    dataset = write_dataset(tmp_path / "d.jsonl", 2)
    summary = await run_batch(write_config(tmp_path / "c.yaml", dataset), tmp_path / "out")
    (session,) = json.loads((tmp_path / "out" / "progress.json").read_text())["sessions"]
    assert 100.0 <= session["elapsed_s"] < 200.0
    assert summary.wall_time_s == session["elapsed_s"]
