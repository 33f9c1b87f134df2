"""The recorder scenario: what the ``recorder`` built-in adds to a call, on a fast and a slow disk.

One ``sample()`` call of 16 attempts (``loop_budget=4, concurrency_budget=4``, 5 ms backend,
never passing: 62 hook events per call) with no plugin, with the recorder writing to a file
in a temporary directory, and with the recorder on a slow disk (every write of its file
takes 2 ms more, as on a busy network disk). The recorder encodes and writes its events in
the background (``@background``), so the call's wall time should not carry the writes. The
events still queued after the timed batches are drained (``aclose``) outside the timing;
how long that took is reported beside the row. The bare loop and Mellea make the same 16
attempts, for reference.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from benchmarks.background_observer import sixteen_attempts
from benchmarks.fakes import EngineBackend, FakeModel
from benchmarks.report import Check, Row
from benchmarks.timing import median, paired_ratio, time_batches
from builtin_plugins.recorder import RecorderPlugin
from sampling_core import Sampler

SLOW_WRITE_S = 0.002


class SlowFile:
    """A file whose every write takes ``SLOW_WRITE_S`` longer (a slow disk)."""

    def __init__(self, real: IO[str]) -> None:
        self.real = real

    def write(self, text: str) -> int:
        time.sleep(SLOW_WRITE_S)
        return self.real.write(text)

    def flush(self) -> None:
        self.real.flush()

    def close(self) -> None:
        self.real.close()


def slow_disk(recorder: RecorderPlugin) -> None:
    """Put ``recorder``'s file on a slow disk (every file it opens from now on)."""
    output = recorder.output
    real_open = output.open_file
    output.open_file = lambda: SlowFile(real_open())  # type: ignore[method-assign]


async def recorder(s: Any) -> list[Row]:
    """The call's wall time with no plugin, the recorder, and the recorder on a slow disk."""
    model = FakeModel(latency=0.005)
    folder = Path(tempfile.mkdtemp(prefix="samplehooks-bench-"))
    fast, slow = RecorderPlugin(folder / "fast.jsonl"), RecorderPlugin(folder / "slow.jsonl")
    slow_disk(slow)
    samplers = {
        "no plugin": Sampler(EngineBackend(model), load_entrypoints=False),
        "recorder": Sampler(EngineBackend(model), plugins=[fast], load_entrypoints=False),
        "recorder, slow disk": Sampler(
            EngineBackend(model), plugins=[slow], load_entrypoints=False
        ),
    }

    runners = sixteen_attempts(model, samplers)
    calls = 1 if s.quick else 5
    seconds = await time_batches(runners, calls=calls, repeats=s.repeats, warmup=1)
    drained_ms = {}
    for name, sampler in samplers.items():
        began = time.perf_counter()
        await sampler.aclose()  # every queued event written (not timed with the calls)
        drained_ms[name] = (time.perf_counter() - began) * 1e3
    for plugin in (fast, slow):
        plugin.close()
    shutil.rmtree(folder, ignore_errors=True)
    lines = {"recorder": fast.lines_written, "recorder, slow disk": slow.lines_written}
    ms = {name: median(v) / calls * 1e3 for name, v in seconds.items()}
    setting = "16 attempts (loop_budget=4, concurrency_budget=4), 5 ms backend"
    rows = []
    disks = {
        "recorder": "file in a temporary directory",
        "recorder, slow disk": f"every write {SLOW_WRITE_S * 1e3:g} ms slower",
    }
    for name, disk in disks.items():
        paired = paired_ratio(seconds, name, "no plugin")
        rows.append(
            Row(
                "recorder",
                f"{setting}, recorder: {disk}",
                "ms per call",
                {"engine": ms[name], "bare": ms.get("bare"), "mellea": ms.get("mellea")},
                # a slow disk is a slow background observer: the target for those
                [Check("÷ no plugin", paired, "<", 1.05)] if name != "recorder" else [],
                {
                    "no_plugin_ms": ms["no plugin"],
                    "ratio_of_medians": ms[name] / ms["no plugin"],
                    "median_of_paired_ratios": paired,
                    "drain_after_ms": drained_ms[name],
                    "lines_written": lines[name],
                },
            )
        )
    return rows
