"""The ``recorder`` plugin: every hook event as one JSON line, for replay and analysis.

Each line is ``{"hook": ..., "time": ..., "payload": {...}}``: the hook's name, the wall
clock time (seconds since the epoch) and the payload as JSON (``model_dump(mode="json")``),
scrubbed of secrets (:mod:`sampling_core.redaction`).
``Generation.raw`` is never written (it may hold anything); exceptions are written as
text; values JSON cannot hold are written as their ``repr``. Prompts, generated text and
failure reasons are left out unless ``capture_content=True``, like the ``tracing`` plugin.

Delivery is in the background (``@background``, see ``docs/hook-delivery.md``): at each hook the
recorder only notes the event (its hook, the wall clock time, and the payload, which for
the four hooks that may write is turned into JSON data right then, as plugins left it;
the payloads of observe-only hooks are read-only snapshots); the worker thread the
``Sampler`` owns encodes the noted events and appends them to the file after each
``sampling_iteration``, ``sampling_loop_end``, ``prompt_end`` and ``run_end``, so the JSON
encoding and the blocking
writes are done off the event loop and a slow disk never holds up sampling. Events are
written in the order the hooks fired, one call's and several calls' (and threads') alike.
Every event is in the file when ``sample_sync``, ``Sampler.aclose()`` (the end of
``async with Sampler(...)``) or a batch run return, when :meth:`RecorderPlugin.close` returns,
and at interpreter exit; a killed process loses the events not yet written.
``samplehooks trace show FILE`` prints a recorded file as a per-call timeline.

Enabled by name, it writes to ``SAMPLEHOOKS_RECORDER_PATH`` (default
``samplehooks-events.jsonl``) and captures content when ``SAMPLEHOOKS_TRACE_CONTENT=1``.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import deque
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from hook_specs import (
    Attempt,
    GenerationCallPayload,
    GenerationCancelledPayload,
    GenerationChunkPayload,
    GenerationErrorPayload,
    GenerationPostCallPayload,
    GenerationPreCallPayload,
    HookPayload,
    PromptEndPayload,
    PromptStartPayload,
    RunEndPayload,
    RunStartPayload,
    SamplingCallPayload,
    SamplingIterationPayload,
    SamplingLoopEndPayload,
    SamplingLoopStartPayload,
    SamplingRepairPayload,
    SamplingValidatePayload,
    background,
    hookimpl,
)
from sampling_core.events.reading import EventFileError, read_events
from sampling_core.redaction import one_json_line, refresh_environment, scrub_data
from sampling_core.runs import AttemptEntry

__all__ = ["DEFAULT_PATH", "EventFileError", "RecorderPlugin", "read_events"]

DEFAULT_PATH = "samplehooks-events.jsonl"
_TRUE = {"1", "true", "yes", "on"}

# What to leave out of each hook's payload: always (raw backend objects) and, unless
# content is captured, every field that holds prompt or output text.
_ALWAYS: dict[str, Any] = {
    "sampling_validate": {"generation": {"raw"}},
    "sampling_iteration": {"generation": {"raw"}},
    "generation_post_call": {"generation": {"raw"}},
    # the loop end's attempts are written as a record's entries (EventLines.attempt): their
    # prompts are in the call's generation events already
}
_CONTENT: dict[str, Any] = {
    "sampling_loop_start": {"messages": True},
    "sampling_validate": {
        "generation": {"raw", "text"},
        "text": True,
        "messages": True,
        "results": {"__all__": {"reason"}},
    },
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
    "sampling_loop_end": {"text": True},  # and each attempt's text (EventLines.attempt)
    "generation_pre_call": {"messages": True},
    "generation_post_call": {"generation": {"raw", "text"}},
    "prompt_start": {"row": True},  # the dataset line holds the prompt
    "prompt_end": {"record": True},  # the record, text included, is in records.jsonl
    "generation_chunk": {"delta": True, "text": True},
    "generation_cancelled": {"text": True},
    "sampling_call": {"messages": True},
    "generation_call": {"messages": True},
}


class EventLines:
    """The recorder's file, and the events noted for it and not yet written.

    :meth:`note` is called on the event loop and only appends to a deque (it never waits
    for the file's lock); :meth:`write_noted` (the background worker, :meth:`close`) takes
    the noted events off in order, encodes them and appends them, under the file's lock.
    """

    def __init__(self, path: Path, exclude: dict[str, Any], capture_content: bool = False) -> None:
        self.path = path
        self.exclude = exclude
        self.capture_content = capture_content
        self.lines_written = 0
        self._noted: deque[tuple[str, float, Any]] = deque()
        self._lock = threading.Lock()
        self._file: IO[str] | None = None

    def dump(self, hook: str, payload: HookPayload) -> dict[str, Any]:
        """The payload as JSON data, content left out as configured; the loop end's
        attempts in the one JSON shape of an attempt (a run's records use it too)."""
        exclude = self.exclude.get(hook)
        if hook != "sampling_loop_end":
            return payload.model_dump(mode="json", exclude=exclude, fallback=repr)
        data = payload.model_dump(
            mode="json", exclude={**(exclude or {}), "attempts": True}, fallback=repr
        )
        data["attempts"] = [self.attempt(a) for a in getattr(payload, "attempts", ())]
        return data

    def attempt(self, attempt: Attempt) -> dict[str, Any]:
        """One attempt of a loop end as a record's entry shows it, without the messages it
        sent (the call's generation events hold them) and, unless content is captured,
        without its text and the checks' reasons."""
        entry = AttemptEntry.of_attempt(attempt).as_json()
        entry.pop("messages", None)
        if not self.capture_content:
            for name in ("text", "failed"):
                entry.pop(name, None)
            for verdict in entry.get("validations") or []:
                verdict.pop("reason", None)
        return entry

    def line(self, hook: str, when: float, data: dict[str, Any]) -> str:
        """One event's line (newline included)."""
        return one_json_line(
            {"hook": hook, "time": when, "payload": scrub_data(data)}, default=repr
        )

    def note(self, hook: str, item: HookPayload | dict[str, Any]) -> None:
        """Note an event now (its time is now): a read-only payload, or JSON data."""
        self._noted.append((hook, time.time(), item))

    def write_noted(self) -> None:
        """Append every event noted so far, in the order noted, and flush."""
        with self._lock:
            if not self._noted:
                return
            lines = []
            failed: Exception | None = None
            while self._noted:
                hook, when, item = self._noted.popleft()
                try:
                    data = item if isinstance(item, dict) else self.dump(hook, item)
                    lines.append(self.line(hook, when, data))
                except Exception as exc:  # the others are still written; this one reported
                    failed = failed or exc
            if lines:
                if self._file is None:
                    self._file = self.open_file()
                self._file.write("".join(lines))
                self._file.flush()
                self.lines_written += len(lines)
        if failed is not None:
            raise failed

    def open_file(self) -> IO[str]:
        """Open :attr:`path` for appending (its parent directories created)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return self.path.open("a", encoding="utf-8")

    def close(self) -> None:
        """Write what is noted, then close the file (a later event opens it again)."""
        try:
            self.write_noted()
        finally:
            with self._lock:
                if self._file is not None:
                    self._file.close()
                    self._file = None


class RecorderPlugin:
    """Appends every hook event to ``path`` as one JSON line (written in the background).

    ``path``: the file (created with its parent directories; appended to if it exists).
    ``capture_content``: also write prompts, generated text and failure reasons.
    The file is opened on the first write and closed by :meth:`close`, on exit from a
    ``with`` block, or when the recorder is garbage-collected (each writes what is noted
    first).
    """

    affects_results = False
    writes_artifacts = True  # events.jsonl in a run's directory: it may not change on --resume
    reads_environment = ("SAMPLEHOOKS_TRACE_CONTENT",)  # its path is the run's in a run

    def __init__(
        self, path: str | os.PathLike[str] | None = None, *, capture_content: bool | None = None
    ) -> None:
        self._path_given = path is not None
        if path is None:
            path = os.environ.get("SAMPLEHOOKS_RECORDER_PATH") or DEFAULT_PATH
        if capture_content is None:
            capture_content = os.environ.get("SAMPLEHOOKS_TRACE_CONTENT", "").lower() in _TRUE
        refresh_environment()
        self.capture_content = capture_content
        self.output = EventLines(
            Path(path), _ALWAYS if capture_content else _CONTENT, capture_content
        )
        """The file, and the events noted for it and not yet written."""
        # A recorder enabled by name is never closed explicitly: what it noted is written
        # and its file closed when it goes away, or at interpreter exit.
        weakref.finalize(self, self.output.close)

    @property
    def path(self) -> Path:
        """The file events are appended to."""
        return self.output.path

    @path.setter
    def path(self, path: str | os.PathLike[str]) -> None:
        self.close()
        self.output.path = Path(path)

    @property
    def lines_written(self) -> int:
        """Event lines written so far (events noted but not yet written are not counted)."""
        return self.output.lines_written

    def for_run(self, events_file: os.PathLike[str] | str, total: int = 0) -> None:
        """Configure for a batch run: write into the run's ``events_file``.

        A run's events always go there (the run's files are found, resumed and viewed
        together), so a ``path`` given as an option is refused (``ValueError``) rather than
        ignored while recorded in the run's config.
        """
        if self._path_given:
            raise ValueError(
                f"option 'path' ({str(self.path)!r}) cannot be used in a batch run: a run's "
                "recorder writes the run's own events.jsonl; leave the option out"
            )
        self.path = Path(events_file)

    def close(self) -> None:
        """Write every event noted so far, then close the file (a later event opens it
        again, appending)."""
        self.output.close()

    def __enter__(self) -> RecorderPlugin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- hooks that may write: noted as JSON data at once (as the plugins before left it)

    @hookimpl(trylast=True)
    def sampling_loop_start(self, payload: SamplingLoopStartPayload) -> None:
        """Note the call's start, with the budgets every other plugin agreed on."""
        self.output.note("sampling_loop_start", self.output.dump("sampling_loop_start", payload))

    @hookimpl(trylast=True)
    def sampling_validate(self, payload: SamplingValidatePayload) -> None:
        """Note an attempt's verdicts (as the plugins before changed them)."""
        if payload.well_formed_results() is None:  # a plugin wrote something else:
            return  # the engine names it, and the attempt is not recorded as checked
        self.output.note("sampling_validate", self.output.dump("sampling_validate", payload))

    @hookimpl(trylast=True)
    def sampling_repair(self, payload: SamplingRepairPayload) -> None:
        """Note a repair (after other plugins edited the messages)."""
        self.output.note("sampling_repair", self.output.dump("sampling_repair", payload))

    @hookimpl(trylast=True)
    def generation_pre_call(self, payload: GenerationPreCallPayload) -> None:
        """Note a backend call about to be made (as other plugins left it)."""
        self.output.note("generation_pre_call", self.output.dump("generation_pre_call", payload))

    # -- observe-only hooks: their read-only payloads noted as they are, encoded later

    @hookimpl
    def sampling_iteration(self, payload: SamplingIterationPayload) -> None:
        """Note a completed attempt."""
        self.output.note("sampling_iteration", payload)

    @hookimpl
    def sampling_loop_end(self, payload: SamplingLoopEndPayload) -> None:
        """Note the call's end."""
        self.output.note("sampling_loop_end", payload)

    @hookimpl
    def generation_post_call(self, payload: GenerationPostCallPayload) -> None:
        """Note a backend call that returned."""
        self.output.note("generation_post_call", payload)

    @hookimpl
    def generation_error(self, payload: GenerationErrorPayload) -> None:
        """Note a backend call that raised."""
        self.output.note("generation_error", payload)

    @hookimpl(wrapper=True, trylast=True)
    def sampling_call(self, payload: SamplingCallPayload) -> Any:
        """Note the call's work as it begins (the innermost wrapper)."""
        self.output.note("sampling_call", payload)
        return (yield)

    @hookimpl(wrapper=True, trylast=True)
    def generation_call(self, payload: GenerationCallPayload) -> Any:
        """Note a backend call as it begins (the innermost wrapper)."""
        self.output.note("generation_call", payload)
        return (yield)

    @hookimpl
    def generation_cancelled(self, payload: GenerationCancelledPayload) -> None:
        """Note a backend call that was cancelled before it answered."""
        self.output.note("generation_cancelled", payload)

    @hookimpl
    def generation_chunk(self, payload: GenerationChunkPayload) -> None:
        """Note a piece of a streamed generation (its text only when content is captured)."""
        self.output.note("generation_chunk", payload)

    # -- a batch run's hooks (fired where the run directory is written)

    @hookimpl
    def run_start(self, payload: RunStartPayload) -> None:
        """Note a session of a batch run starting."""
        self.output.note("run_start", payload)

    @hookimpl
    def prompt_start(self, payload: PromptStartPayload) -> None:
        """Note a prompt about to be sampled."""
        self.output.note("prompt_start", payload)

    @hookimpl
    def prompt_end(self, payload: PromptEndPayload) -> None:
        """Note a prompt whose record is written."""
        self.output.note("prompt_end", payload)

    @hookimpl
    def run_end(self, payload: RunEndPayload) -> None:
        """Note the session's end."""
        self.output.note("run_end", payload)

    # -- the writing, off the event loop: after each completed attempt, each call's end,
    # each prompt's end and the session's end

    @hookimpl(specname="sampling_iteration")
    @background
    def write_after_iteration(self, payload: SamplingIterationPayload) -> None:
        """Encode and append the events noted so far (in the background)."""
        self.output.write_noted()

    @hookimpl(specname="sampling_loop_end")
    @background
    def write_after_loop_end(self, payload: SamplingLoopEndPayload) -> None:
        """Encode and append the events noted so far, the call's end included."""
        self.output.write_noted()

    @hookimpl(specname="prompt_end")
    @background
    def write_after_prompt_end(self, payload: PromptEndPayload) -> None:
        """Encode and append the events noted so far, the prompt's end included."""
        self.output.write_noted()

    @hookimpl(specname="run_end")
    @background
    def write_after_run_end(self, payload: RunEndPayload) -> None:
        """Encode and append the events noted so far, the session's end included."""
        self.output.write_noted()
