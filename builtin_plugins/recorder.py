"""The ``recorder`` plugin: every hook event as one JSON line, for replay and analysis.

Each line is ``{"hook": ..., "time": ..., "payload": {...}}``: the hook's name, the wall
clock time (seconds since the epoch) and the payload as JSON (``model_dump(mode="json")``),
scrubbed of secrets (:mod:`sampling_core.redaction`).
``Generation.raw`` is never written (it may hold anything); exceptions are written as
text; values JSON cannot hold are written as their ``repr``. Prompts, generated text and
failure reasons are left out unless ``capture_content=True``, like the ``tracing`` plugin.

Lines are appended under a lock and flushed one by one, so several calls (and threads)
can share one recorder and a killed process loses at most the line being written.
``samplehooks trace show FILE`` prints a recorded file as a per-call timeline.

Enabled by name, it writes to ``SAMPLEHOOKS_RECORDER_PATH`` (default
``samplehooks-events.jsonl``) and captures content when ``SAMPLEHOOKS_TRACE_CONTENT=1``.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from hook_specs import (
    GenerationErrorPayload,
    GenerationPostCallPayload,
    GenerationPreCallPayload,
    HookPayload,
    SamplingIterationPayload,
    SamplingLoopEndPayload,
    SamplingLoopStartPayload,
    SamplingRepairPayload,
    hookimpl,
)
from sampling_core.events import EventFileError, read_events
from sampling_core.redaction import one_json_line, refresh_environment, scrub_data

__all__ = ["DEFAULT_PATH", "EventFileError", "RecorderPlugin", "read_events"]

DEFAULT_PATH = "samplehooks-events.jsonl"
_TRUE = {"1", "true", "yes", "on"}

# What to leave out of each hook's payload: always (raw backend objects) and, unless
# content is captured, every field that holds prompt or output text.
_ALWAYS: dict[str, Any] = {
    "sampling_iteration": {"generation": {"raw"}},
    "generation_post_call": {"generation": {"raw"}},
}
_CONTENT: dict[str, Any] = {
    "sampling_loop_start": {"messages": True},
    "sampling_iteration": {
        "generation": {"raw", "text"},
        "text": True,
        "validations": {"__all__": {"reason"}},
    },
    "sampling_repair": {
        "text": True,
        "messages": True,
        "failure_reasons": True,
        "validations": {"__all__": {"reason"}},
    },
    "sampling_loop_end": {"text": True},
    "generation_pre_call": {"messages": True},
    "generation_post_call": {"generation": {"raw", "text"}},
}


class RecorderPlugin:
    """Appends every hook event to ``path`` as one JSON line.

    ``path``: the file (created with its parent directories; appended to if it exists).
    ``capture_content``: also write prompts, generated text and failure reasons.
    The file is opened on the first event and closed by :meth:`close`, on exit from a
    ``with`` block, or when the recorder is garbage-collected.
    """

    affects_results = False  # may be added, removed or reconfigured on --resume

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, capture_content: bool | None = None
    ) -> None:
        if path is None:
            path = os.environ.get("SAMPLEHOOKS_RECORDER_PATH") or DEFAULT_PATH
        if capture_content is None:
            capture_content = os.environ.get("SAMPLEHOOKS_TRACE_CONTENT", "").lower() in _TRUE
        refresh_environment()
        self.path = Path(path)
        self.capture_content = capture_content
        self._exclude = _ALWAYS if capture_content else _CONTENT
        self._file: IO[str] | None = None
        self._closer: weakref.finalize | None = None
        self._lock = threading.Lock()
        self.lines_written = 0

    def for_run(self, events_file: os.PathLike[str] | str, total: int = 0) -> None:
        """Configure for a batch run: write into the run's ``events_file``."""
        self.close()
        self.path = Path(events_file)

    def close(self) -> None:
        """Close the file (a later event opens it again, appending)."""
        with self._lock:
            if self._closer is not None:
                self._closer()  # closes the file
            self._file = self._closer = None

    def __enter__(self) -> RecorderPlugin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def encode(self, hook: str, payload: HookPayload) -> str:
        """One event as its JSON line (without the newline), content left out as configured."""
        data = payload.model_dump(mode="json", exclude=self._exclude.get(hook), fallback=repr)
        return one_json_line(
            {"hook": hook, "time": time.time(), "payload": scrub_data(data)}, default=repr
        ).removesuffix("\n")

    def record(self, hook: str, payload: HookPayload) -> None:
        """Append one event line (what every hook implementation below does)."""
        line = self.encode(hook, payload)
        with self._lock:
            if self._file is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._file = self.path.open("a", encoding="utf-8")
                # A recorder enabled by name is never closed explicitly: close the file
                # when the recorder goes away, without a ResourceWarning.
                self._closer = weakref.finalize(self, self._file.close)
            self._file.write(line + "\n")
            self._file.flush()
            self.lines_written += 1

    @hookimpl(trylast=True)
    def sampling_loop_start(self, payload: SamplingLoopStartPayload) -> None:
        """Record the call's start, with the budgets every other plugin agreed on."""
        self.record("sampling_loop_start", payload)

    @hookimpl
    def sampling_iteration(self, payload: SamplingIterationPayload) -> None:
        """Record a completed attempt."""
        self.record("sampling_iteration", payload)

    @hookimpl(trylast=True)
    def sampling_repair(self, payload: SamplingRepairPayload) -> None:
        """Record a repair (after other plugins edited the messages)."""
        self.record("sampling_repair", payload)

    @hookimpl
    def sampling_loop_end(self, payload: SamplingLoopEndPayload) -> None:
        """Record the call's end."""
        self.record("sampling_loop_end", payload)

    @hookimpl(trylast=True)
    def generation_pre_call(self, payload: GenerationPreCallPayload) -> None:
        """Record a backend call about to be made (as other plugins left it)."""
        self.record("generation_pre_call", payload)

    @hookimpl
    def generation_post_call(self, payload: GenerationPostCallPayload) -> None:
        """Record a backend call that returned."""
        self.record("generation_post_call", payload)

    @hookimpl
    def generation_error(self, payload: GenerationErrorPayload) -> None:
        """Record a backend call that raised."""
        self.record("generation_error", payload)
