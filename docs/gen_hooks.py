"""Write ``docs/hooks.md``, the hook reference, from the hook contract in ``hook_specs``.

Run ``python docs/gen_hooks.py`` after changing a hookspec, a payload field or an example;
``tests/docs/test_docs.py`` fails while the committed page differs from what this script writes.
Signatures and docstrings come from :mod:`hook_specs.specs`, payload fields (type as written
in the source, description, whether writable) from the pydantic models in
:data:`hook_specs.PAYLOAD_TYPES`; only the examples below are written here by hand.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
import textwrap
from pathlib import Path

from hook_specs import PAYLOAD_TYPES, HookName, HookPayload, may_write, specs
from hook_specs.records import Generation, IterationInfo, Provenance, Usage, ValidationResult

OUTPUT = Path(__file__).with_name("hooks.md")

# One example implementation per hook. Every one is a complete plugin: tests/docs/test_docs.py
# runs them all together in a `sample()` call.
EXAMPLES: dict[HookName, str] = {
    HookName.SAMPLING_LOOP_START: '''
        from hook_specs import SamplingLoopStartPayload, hookimpl


        class CapConcurrency:
            """Never run more than 4 subsamples at once, whatever the caller asked."""

            @hookimpl
            def sampling_loop_start(self, payload: SamplingLoopStartPayload) -> None:
                payload.concurrency_budget = min(payload.concurrency_budget, 4)
    ''',
    HookName.SAMPLING_ITERATION: '''
        import structlog

        from hook_specs import SamplingIterationPayload, hookimpl

        log = structlog.get_logger("my_plugin")


        class LogAttempts:
            """One log line per completed attempt."""

            @hookimpl
            def sampling_iteration(self, payload: SamplingIterationPayload) -> None:
                log.info(
                    "attempt.done",
                    iteration=payload.iteration,
                    sequence=payload.sequence,
                    passed=payload.passed,
                    checks=f"{payload.valid_count}/{payload.total_count}",
                )
    ''',
    HookName.SAMPLING_REPAIR: '''
        from hook_specs import SamplingRepairPayload, hookimpl


        class Reminder:
            """Add the failure reasons as a last user message before the next attempt."""

            @hookimpl
            def sampling_repair(self, payload: SamplingRepairPayload) -> None:
                note = "Please fix: " + "; ".join(payload.failure_reasons)
                payload.messages = [*payload.messages, {"role": "user", "content": note}]
    ''',
    HookName.SAMPLING_LOOP_END: '''
        from hook_specs import SamplingLoopEndPayload, hookimpl


        class CallSummary:
            """Keep one line per call: why it ended, which attempt won, the tokens."""

            def __init__(self) -> None:
                self.lines: list[str] = []

            @hookimpl
            def sampling_loop_end(self, payload: SamplingLoopEndPayload) -> None:
                passed = sum(attempt.passed for attempt in payload.attempts)
                outcome = payload.failure_reason or f"picked attempt #{payload.picked}"
                self.lines.append(
                    f"{payload.sampling_id}: {payload.stop_reason} ({outcome}); "
                    f"{passed} of {payload.iterations_used} attempts passed, "
                    f"{payload.cancelled} cancelled, {payload.usage.total_tokens} tokens"
                )
    ''',
    HookName.GENERATION_PRE_CALL: '''
        from hook_specs import GenerationPreCallPayload, hookimpl


        class WarmUp:
            """Raise the temperature with every attempt of a subsample."""

            @hookimpl(tryfirst=True)
            def generation_pre_call(self, payload: GenerationPreCallPayload) -> None:
                temperature = min(1.0, 0.2 * payload.attempt)
                payload.options = {**payload.options, "temperature": temperature}
    ''',
    HookName.GENERATION_POST_CALL: '''
        import anyio

        from hook_specs import GenerationPostCallPayload, hookimpl


        class TokenMeter:
            """Count the tokens of every backend call; async implementations are awaited."""

            def __init__(self) -> None:
                self.tokens = 0
                self._lock = anyio.Lock()

            @hookimpl
            async def generation_post_call(self, payload: GenerationPostCallPayload) -> None:
                async with self._lock:  # e.g. while writing to a shared store
                    self.tokens += payload.generation.usage.total_tokens
    ''',
    HookName.GENERATION_ERROR: '''
        from collections import Counter

        from hook_specs import GenerationErrorPayload, hookimpl


        class ErrorCounter:
            """Count backend errors by type, retried ones apart."""

            def __init__(self) -> None:
                self.errors: Counter[str] = Counter()

            @hookimpl
            def generation_error(self, payload: GenerationErrorPayload) -> None:
                kind = "retried" if payload.will_retry else "final"
                self.errors[f"{payload.error_type} ({kind})"] += 1
    ''',
    HookName.GENERATION_CHUNK: '''
        import time

        from hook_specs import GenerationChunkPayload, background, hookimpl


        class TimeToFirstChunk:
            """When each attempt's first piece of text arrived (its answer streams because
            this plugin listens); delivered in the background, so it never slows sampling."""

            def __init__(self) -> None:
                self.first: dict[tuple[str, int], float] = {}

            @hookimpl
            @background
            def generation_chunk(self, payload: GenerationChunkPayload) -> None:
                if payload.index == 0:
                    self.first[(payload.sampling_id, payload.iteration)] = time.monotonic()
    ''',
    HookName.SAMPLING_CALL: '''
        import time

        from hook_specs import SamplingCallPayload, hookimpl


        class CallTimer:
            """How long each call's work took, whether it succeeded, failed or was cancelled."""

            def __init__(self) -> None:
                self.seconds: dict[str, float] = {}

            @hookimpl(wrapper=True)
            def sampling_call(self, payload: SamplingCallPayload):
                started = time.perf_counter()
                try:
                    return (yield)  # the SamplingResult, handed back unchanged
                finally:  # runs once, however the call ends
                    self.seconds[payload.sampling_id] = time.perf_counter() - started
    ''',
    HookName.GENERATION_CALL: '''
        import anyio

        from hook_specs import GenerationCallPayload, hookimpl


        class TwoCallsAtATime:
            """At most two backend calls at once, across every call of the sampler: the slot
            is given back however the backend call ends (answer, error, cancellation)."""

            def __init__(self) -> None:
                self.slots: anyio.Semaphore | None = None

            @hookimpl(wrapper=True)
            async def generation_call(self, payload: GenerationCallPayload):
                if self.slots is None:
                    self.slots = anyio.Semaphore(2)
                async with self.slots:
                    yield  # evaluates to a pluggy.Result: .get_result(), .force_result(...)
    ''',
    HookName.GENERATION_CANCELLED: '''
        from collections import Counter

        from hook_specs import GenerationCancelledPayload, hookimpl


        class CancelledCalls:
            """Count the backend calls cut short, by why, and what they had generated."""

            def __init__(self) -> None:
                self.reasons: Counter[str] = Counter()
                self.chars = 0

            @hookimpl
            def generation_cancelled(self, payload: GenerationCancelledPayload) -> None:
                self.reasons[payload.reason] += 1
                self.chars += len(payload.text or "")
    ''',
    HookName.SAMPLING_VALIDATE: '''
        import dataclasses

        from hook_specs import SamplingValidatePayload, ValidationResult, hookimpl


        class NoRefusals:
            """Fail any answer that refuses, whatever the checks said, and say why."""

            @hookimpl
            def sampling_validate(self, payload: SamplingValidatePayload) -> None:
                if payload.text.lower().startswith(("i cannot", "i can't")):
                    payload.results = [
                        dataclasses.replace(v, passed=False, reason="the model refused")
                        for v in payload.results
                    ] or [ValidationResult(False, "the model refused", None, "no refusal")]
    ''',
    HookName.RUN_START: '''
        from hook_specs import RunStartPayload, hookimpl


        class RunBanner:
            """Say what each session of a batch run is about to do."""

            def __init__(self) -> None:
                self.lines: list[str] = []

            @hookimpl
            def run_start(self, payload: RunStartPayload) -> None:
                verb = "resuming" if payload.resumed else "starting"
                left = payload.total - payload.done
                self.lines.append(
                    f"{verb} {payload.run_dir} (session {payload.session}): "
                    f"{left} of {payload.total} prompts to run ({payload.executor})"
                )
    ''',
    HookName.PROMPT_START: '''
        from collections import Counter

        from hook_specs import PromptStartPayload, hookimpl


        class TopicCounter:
            """Count the prompts this session samples by their dataset line's `topic`."""

            def __init__(self) -> None:
                self.topics: Counter[str] = Counter()

            @hookimpl
            def prompt_start(self, payload: PromptStartPayload) -> None:
                self.topics[str(payload.row.get("topic", "none"))] += 1
    ''',
    HookName.PROMPT_END: '''
        import json

        from hook_specs import PromptEndPayload, background, hookimpl


        class FailureLog:
            """Append each prompt that did not pass to a JSONL file, off the event loop."""

            def __init__(self, path: str = "failures.jsonl") -> None:
                self.path = path

            @hookimpl
            @background  # the file is written by a worker thread: sampling never waits
            def prompt_end(self, payload: PromptEndPayload) -> None:
                record = payload.record
                if payload.status in ("failed", "error"):  # not "ok", nor "interrupted"
                    line = {"key": payload.key, "status": payload.status}
                    with open(self.path, "a", encoding="utf-8") as out:
                        out.write(json.dumps({**line, "reason": record["reason"]}) + "\\n")
    ''',
    HookName.RUN_END: '''
        from hook_specs import RunEndPayload, hookimpl


        class Scoreboard:
            """One line per session: how the whole run stands, with pass^k when measured."""

            def __init__(self) -> None:
                self.lines: list[str] = []

            @hookimpl
            def run_end(self, payload: RunEndPayload) -> None:
                t = payload.totals
                line = f"{t['ok']} ok, {t['failed']} failed, {t['error']} errors of {t['total']}"
                for p in payload.pass_hat_k or []:
                    line += f"; pass^{p['k']} {p['value']:.0%}"
                if payload.interrupted:
                    line += " (interrupted)"
                self.lines.append(line)
    ''',
}

# What to know when writing a field, beyond its description.
WRITABLE_NOTES: dict[str, str] = {
    "results": (
        " The list is this payload's own; a `ValidationResult` is frozen: replace one"
        " (`dataclasses.replace(v, passed=True, reason=...)`), append one, or assign a new list."
        " Anything but a list of `ValidationResult` fails closed."
    ),
    "loop_budget": "",
    "concurrency_budget": (
        " The engine checks both budgets after the last implementation ran: an `int` >= 1"
        " (not a `bool`) within the sampler's caps, else `BudgetError` names the field, the"
        " value and the plugin that wrote it."
    ),
    "messages": (
        " The list is this payload's own, but the message dicts in it are shared with the"
        ' call\'s prompt: replace a message (`{**message, "content": ...}`) or assign a new'
        " list; never edit a message dict in place."
    ),
    "options": (
        " `options` is a copy for this backend call: assigning or editing its keys affects this"
        " call only."
    ),
}

RECORDS = (Generation, Usage, ValidationResult, IterationInfo, Provenance)

INTRO = """\
# Hook reference

<!-- Generated by docs/gen_hooks.py from hook_specs: edit the hookspecs, the payload models or
the examples in that script, then run `python docs/gen_hooks.py`. -->

Every hook takes exactly one argument, `payload`: a pydantic model whose fields are listed
below. New fields may be added in later versions, so read the fields you need and ignore the
rest. An implementation may be a plain function or `async def` (it is awaited before the next
implementation runs), and may leave out the `payload` argument if it does not need it.

Writing a field that the hook does not let plugins change raises `ReadOnlyFieldError` (an
`AttributeError`) at once, naming the field and the hook. How a fault is handled depends on
the hook: where plugins may change the payload, the engine **fails closed** (`sample()`
raises `PluginError(plugin_name, hook)`); in observe-only hooks the fault is **isolated**
(logged as `plugin.error` and kept in `result.plugin_errors`) unless the sampler is strict
(`Sampler(..., strict_plugins=True)`). See [Writing plugins](writing-plugins.md) for
ordering, packaging and testing, and [Concepts](concepts.md) for the numbering fields.

For one attempt the hooks fire in this order:

```text
sampling_loop_start                          once per call
sampling_call                                around the call's work and its pick (wrappers)
  generation_pre_call                        before each backend call (and each transport retry)
  generation_call                            around the backend call (wrappers; may answer)
    generation_chunk                         each piece of text, when the answer streams
  generation_post_call | generation_error    after it returned | raised
    | generation_cancelled                   | was cancelled before either
  sampling_iteration                         the attempt, validated
  sampling_repair                            it failed and its subsample tries again
  ...
sampling_loop_end                            once per call, on every path
```

The two **call hooks**, `sampling_call` and `generation_call`, are fired *around* a piece
of work and take `@hookimpl(wrapper=True)` implementations, sync (pluggy's new-style
wrapper: `result = yield`, then return it or a replacement) or async (an async generator:
`outcome = yield` gives a `pluggy.Result`). An error or a cancellation is raised at the
`yield`, so `finally` and `async with` blocks run exactly once. A plain implementation of
`generation_call` that returns a `Generation` answers instead of the backend. Every other
hook refuses wrappers. See [Writing plugins](writing-plugins.md#wrappers) for when to use
a wrapper and when a pair of hooks.

A batch run (`samplehooks run`, `run_batch`) also fires four **run hooks** around its calls,
in the process that writes the run directory, for the plugins the run names:

```text
run_start                                    once per session (a resume is a new session)
  prompt_start                               each prompt this session samples
    sampling_loop_start ... sampling_loop_end    its call (payloads carry prompt_key)
  prompt_end                                 its record is in records.jsonl
  ...
run_end                                      last; also after Ctrl-C or a fatal error
```

Run hooks are observe-only; a fault in one is isolated and logged as `plugin.error` (the run
goes on). See [Writing an exporter](writing-an-exporter.md) for a plugin built on them.
"""


def annotation_of(model: type, field_name: str) -> str:
    """A field's type as written in the source (the first class in the MRO that declares it)."""
    for klass in model.__mro__:
        written = vars(klass).get("__annotations__", {}).get(field_name)
        if written is not None:
            return written if isinstance(written, str) else inspect.formatannotation(written)
    raise LookupError(f"{model.__name__}.{field_name} has no annotation")


def first_paragraph(text: str) -> tuple[str, str]:
    """Split a docstring into its first paragraph and the rest, both unwrapped."""
    cleaned = inspect.cleandoc(text)
    head, _, rest = cleaned.partition("\n\n")
    return _unwrap(head), "\n\n".join(_unwrap(p) for p in rest.split("\n\n") if p.strip())


def _unwrap(paragraph: str) -> str:
    """One line of Markdown from a reST-ish docstring paragraph."""
    text = " ".join(line.strip() for line in paragraph.splitlines()).replace("``", "`")
    return re.sub(r":[a-z]+:`~?([^`]+)`", r"`\1`", text)


def summary_table() -> str:
    rows = ["| hook | fires | a plugin may change | a fault |", "|---|---|---|---|"]
    for hook in HookName.fired():
        payload = PAYLOAD_TYPES[hook]
        fires, _ = first_paragraph(getattr(specs, hook.value).__doc__ or "")
        change = ", ".join(f"`{f}`" for f in sorted(payload.writable)) or "nothing"
        fault = "fails closed" if may_write(hook) else "is isolated"
        if payload.around:
            change, fault = "the outcome (wrappers)", "is the work's outcome"
        rows.append(f"| [`{hook.value}`](#{hook.value}) | {fires} | {change} | {fault} |")
    return "\n".join(rows)


def stop_sampling_note(hook: HookName) -> str:
    if hook.is_run:
        return "is a fault like any other: a run hook ends no call."
    if hook is HookName.SAMPLING_LOOP_START:
        return 'ends the call before any generation (`stop_reason="stopped_by_plugin"`).'
    if hook in (HookName.SAMPLING_LOOP_END, HookName.GENERATION_CANCELLED):
        return "is a plugin error, handled like any other fault here: that work is over."
    if hook is HookName.SAMPLING_CALL:
        return "is raised out of `sample()` like any exception (after `sampling_loop_end`)."
    return (
        "ends the loop: attempts in flight are cancelled and the result is picked from the "
        'completed attempts, with `stop_reason="stopped_by_plugin"`.'
    )


def fields_table(payload: type[HookPayload]) -> str:
    rows = ["| field | type | description |", "|---|---|---|"]
    for name, info in payload.model_fields.items():
        if not info.description:
            raise ValueError(f"{payload.__name__}.{name} has no Field(description=...)")
        kind = annotation_of(payload, name).replace("|", "\\|")
        writable = " **Writable.**" if name in payload.writable else ""
        text = info.description.removesuffix(" Writable.").replace("|", "\\|")
        rows.append(f"| `{name}` | `{kind}` | {text}{writable} |")
    return "\n".join(rows)


def hook_section(hook: HookName) -> str:
    function = getattr(specs, hook.value)
    payload = PAYLOAD_TYPES[hook]
    (parameter,) = inspect.signature(function).parameters
    signature = f"{hook.value}({parameter}: {payload.__name__})"
    fires, details = first_paragraph(function.__doc__ or "")
    if hook not in EXAMPLES:
        raise ValueError(f"docs/gen_hooks.py has no example for {hook.value}")
    if payload.around:
        change = (
            "The outcome: a sync wrapper returns it or a replacement; an async wrapper calls "
            "`force_result(...)` on the `pluggy.Result` its `yield` gave. The payload is read-only."
        )
    elif payload.writable:
        change = "A plugin may change " + ", ".join(
            f"`{name}`" for name in sorted(payload.writable)
        )
        change += ". Every other field is read-only."
        change += "".join(WRITABLE_NOTES[name] for name in sorted(payload.writable))
    else:
        change = "Nothing: this hook is observe-only; every field is read-only."
    if payload.around:
        fault = (
            "it is the outcome of the work the hook wraps, as if that work raised it "
            "(nothing is isolated; wrappers outside see it at their `yield`)."
        )
    elif may_write(hook):
        fault = "the engine fails closed: `sample()` raises `PluginError`."
    elif hook.is_run:
        fault = "the fault is isolated and logged as `plugin.error`; the run goes on."
    else:
        fault = (
            "the fault is isolated and recorded in `result.plugin_errors` "
            "(strict samplers raise `PluginError`)."
        )
    example = textwrap.dedent(EXAMPLES[hook]).strip()
    parts = [
        f"## `{hook.value}` {{#{hook.value}}}",
        f"```python\n{signature}\n```",
        f"**When it fires.** {fires}",
        details,
        f"**What may be changed.** {change}",
        f"**If an implementation raises** an exception, {fault} "
        f"**Raising `StopSampling`** here {stop_sampling_note(hook)}",
        f"**Payload: `{payload.__name__}`**",
        fields_table(payload),
        "**Example.**",
        f"```python\n{example}\n```",
    ]
    return "\n\n".join(part for part in parts if part)


def record_section(record: type) -> str:
    doc, details = first_paragraph(record.__doc__ or "")
    rows = ["| field | type | default |", "|---|---|---|"]
    for item in dataclasses.fields(record):
        if item.default is not dataclasses.MISSING:
            default = f"`{item.default!r}`"
        elif item.default_factory is not dataclasses.MISSING:
            default = f"`{item.default_factory.__name__}()`"
        else:
            default = "required"
        kind = str(item.type).replace("|", "\\|")
        rows.append(f"| `{item.name}` | `{kind}` | {default} |")
    properties = [
        f"`{name}`"
        for name, value in vars(record).items()
        if isinstance(value, property) and not name.startswith("_")
    ]
    extra = f"Properties: {', '.join(properties)}." if properties else ""
    body = "\n\n".join(p for p in (doc, details, "\n".join(rows), extra) if p)
    return f"### `{record.__name__}`\n\n{body}"


def render() -> str:
    """The whole page."""
    records = "\n\n".join(record_section(r) for r in RECORDS)
    values = (
        "## Values inside payloads\n\n"
        "Plain dataclasses (import them from `hook_specs`). A `Message` is a "
        '`dict[str, Any]` such as `{"role": "user", "content": "..."}`.\n\n' + records
    )
    sections = [INTRO, summary_table(), *(hook_section(h) for h in HookName.fired()), values]
    return "\n\n".join(s.strip() for s in sections) + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT} is stale: run `python docs/gen_hooks.py`", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
