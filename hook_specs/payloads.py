"""The payload of every hook: one pydantic model per hook.

Every hook takes a single argument, ``payload``, so fields can be added later without
breaking plugins. Writing a field the hook does not allow raises
:class:`~hook_specs.errors.ReadOnlyFieldError` at once, naming the field and the hook.
Writable fields accept whatever a plugin writes; the engine validates the values after the
hook ran and names the plugin that wrote a bad one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from hook_specs.errors import ReadOnlyFieldError, exception_text
from hook_specs.frozen import read_only
from hook_specs.names import HookName
from hook_specs.records import (
    WHOLE,
    Attempt,
    CachedGeneration,
    Generation,
    Message,
    Provenance,
    TokenLogprob,
    Usage,
    ValidationResult,
)

CancelReason = Literal[
    "sibling_succeeded", "stopped_by_plugin", "budget", "caller_cancelled", "interrupted", "error"
]
"""Why a backend call that began was cancelled (``generation_cancelled``'s ``reason``)."""

_RETRY_DOC = "0 for the first backend call of the attempt, n for its n-th transport retry."

StopReason = Literal["success", "budget_exhausted", "stopped_by_plugin", "error"]

Purpose = Literal["sample", "judge"]
_PURPOSE_DOC = (
    '"sample" for the attempt\'s own generation; "judge" for a call a check made through the '
    "engine (an LLM-as-judge requirement), which is not an attempt of its own."
)


class HookPayload(BaseModel):
    """What every payload is: a pydantic model that refuses writes to the fields its hook
    does not let plugins change. Per-call payloads add the call's identity
    (:class:`CallPayload`); run payloads the run's (:class:`RunPayload`)."""

    # Who is writing now, and who last wrote each writable field: the payload's own slots
    # (plain Python attributes, not pydantic fields or private attributes), set through
    # :meth:`track_writes` by whoever calls the implementations.
    __slots__ = ("_writer_now", "_writers")

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    hook: ClassVar[HookName]
    writable: ClassVar[frozenset[str]] = frozenset()
    around: ClassVar[bool] = False
    """Whether the hook is fired *around* a piece of work (a call hook: ``sampling_call``,
    ``generation_call``), so ``@hookimpl(wrapper=True)`` implementations are accepted."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in self.writable:
            raise ReadOnlyFieldError(name, self.hook.value, self.writable)
        writer = getattr(self, "_writer_now", None)
        if writer is not None:
            writers = getattr(self, "_writers", None)
            if writers is None:
                writers = {}
                _set(self, "_writers", writers)
            writers[name] = writer
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        # A payload's fields are what the hook promises: nothing is deleted.
        raise AttributeError(f"{name!r} cannot be deleted from a hook payload")

    def track_writes(self, plugin_name: str | None) -> None:
        """Credit the writes made from now on to ``plugin_name`` (``None``: to nobody).

        The engine calls this before each implementation of a hook that may write, so that
        :meth:`written_by` can name the plugin behind a bad value.
        """
        _set(self, "_writer_now", plugin_name)

    def written_by(self, field: str) -> str | None:
        """The name of the last plugin that wrote ``field`` during this hook, if any."""
        writers = getattr(self, "_writers", None)
        return None if writers is None else writers.get(field)

    @classmethod
    def trusted(cls, **fields: Any) -> Any:
        """Build a payload from values the host already trusts, skipping validation.

        The engine builds several payloads per attempt; validating values it made itself
        would cost more than everything else it does. Plugins never need this.
        """
        return cls.builder()(fields)

    @classmethod
    def builder(cls) -> Callable[[dict[str, Any]], Any]:
        """The fastest way to build many payloads of this class: ``build(fields)``.

        ``build`` is :meth:`trusted` made once for this class, taking the dict of fields
        itself (it becomes the payload's). It uses pydantic's pickle protocol only: a
        template payload made by :meth:`model_construct` gives its state
        (``__getstate__``), and each payload is a new instance restored from a copy of that
        state (``__setstate__``) with the given fields as its ``__dict__``. That costs
        about a tenth of :meth:`model_construct` (see ``docs/benchmarks.md``).
        """
        build = _BUILDERS.get(cls)
        if build is None:
            build = _BUILDERS[cls] = _make_builder(cls)
        return build


_new = object.__new__
_set = object.__setattr__

credit_writes: Callable[[HookPayload, str | None], None] = HookPayload.__dict__[
    "_writer_now"
].__set__
"""``credit_writes(payload, plugin_name)``: :meth:`HookPayload.track_writes` without a Python
call (the slot's own setter), for hosts that deliver several payloads per attempt."""
_BUILDERS: dict[type[HookPayload], Callable[[dict[str, Any]], Any]] = {}


def _make_builder(cls: type[HookPayload]) -> Callable[[dict[str, Any]], Any]:
    """``cls``'s :meth:`HookPayload.builder` (see there)."""
    count = len(cls.model_fields)
    defaults = {
        name: info.get_default(call_default_factory=True)
        for name, info in cls.model_fields.items()
        if not info.is_required()
    }
    template = cls.model_construct(**{name: None for name in cls.model_fields})
    state = template.__getstate__()
    # The one key we fill is Python's own ``__dict__``; a set in the state (the names of
    # the fields set, which pydantic adds to) is copied for each payload, as copies do.
    own_sets = tuple(key for key, value in state.items() if isinstance(value, set))
    restore = cls.__setstate__
    new = _new

    order = tuple(cls.model_fields)

    def build(fields: dict[str, Any]) -> Any:
        if len(fields) != count:  # defaults filled in, in the fields' declared order
            given = fields
            for name, value in defaults.items():
                given.setdefault(name, value)
            fields = {name: given[name] for name in order if name in given}
        own = state.copy()
        own["__dict__"] = fields
        for key in own_sets:
            own[key] = set(own[key])
        payload = new(cls)
        restore(payload, own)
        return payload

    return build


class ObserveOnlyPayload(HookPayload):
    """The payload of a hook that may change nothing: read-only all the way down.

    Reading a field whose value could be changed in place (a list, a dict, a dataclass such
    as ``Generation``) returns a read-only view of it (see :mod:`hook_specs.frozen`), made
    on the first read; a write through it raises ``ReadOnlyFieldError`` naming the path and
    the hook. These payloads are snapshots: the engine never changes them once built, so
    they can be delivered later (background observers) as they are.
    """

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if type(value) in _NESTED:
            cls = type(self)
            if name in cls.model_fields:
                value = read_only(value, name, cls.hook.value)
                object.__getattribute__(self, "__dict__")[name] = value
        return value


_NESTED = frozenset({list, dict, tuple, Generation, CachedGeneration, Usage})
"""Types of field values that a plain read would let a plugin change in place."""


class CallPayload(HookPayload):
    """Fields every per-call payload carries: which ``sample()`` call, with which strategy,
    for which dataset prompt."""

    sampling_id: str = Field(
        description="Identifies the `sample()` call; shared by all its events."
    )
    strategy_name: str = Field(description="The strategy's name, e.g. `RejectionSampling`.")
    prompt_key: str | None = Field(
        default=None,
        description="Inside a batch run, the key of the dataset prompt the call samples; "
        "`None` outside a run.",
    )


class AttemptPayload(CallPayload):
    """Fields of every payload fired for one attempt."""

    subsample_index: int = Field(description="0-based index of the subsample.")
    attempt: int = Field(description="1-based attempt number within its subsample.")
    iteration: int = Field(
        description="`subsample_index * loop_budget + attempt`: unique within the call; "
        "not monotonic in event order under concurrency."
    )
    sequence: int | None = Field(
        default=None,
        description="1-based order in which attempts completed within the call "
        "(set once the attempt has completed; `None` before).",
    )


class SamplingLoopStartPayload(CallPayload):
    """Payload of ``sampling_loop_start``."""

    hook: ClassVar[HookName] = HookName.SAMPLING_LOOP_START
    writable: ClassVar[frozenset[str]] = frozenset({"loop_budget", "concurrency_budget"})

    loop_budget: int = Field(description="Attempts per subsample. Writable.")
    concurrency_budget: int = Field(description="Subsamples run at once. Writable.")
    messages: list[Message] = Field(description="The prompt, as chat messages.")
    requirements: list[str] = Field(description="The description of every requirement.")
    selection: str = Field(description='How the answer is picked: "first" or "ordered".')
    seed: int | None = Field(default=None, description="The call's base seed, if any.")
    options: dict[str, Any] = Field(description="Generation options of the call.")
    provider_name: str | None = Field(
        default=None,
        description="The backend's `provider_name` (e.g. `openai`, `llama.cpp`), if it has one.",
    )


class SamplingValidatePayload(AttemptPayload):
    """Payload of ``sampling_validate``: an attempt whose checks ran, before it is judged."""

    hook: ClassVar[HookName] = HookName.SAMPLING_VALIDATE
    writable: ClassVar[frozenset[str]] = frozenset({"results"})

    text: str = Field(description="The generated text the checks saw.")
    messages: list[Message] = Field(description="The messages the attempt sent (its prompt).")
    generation: Generation = Field(description="What the backend returned.")
    results: list[ValidationResult] = Field(
        description="One verdict per requirement, in order. Writable: replace a verdict "
        "(e.g. `dataclasses.replace(v, passed=True, reason=...)`) or append one; the "
        "attempt passes when every result passes."
    )

    def well_formed_results(self) -> list[ValidationResult] | None:
        """``results`` when it is a list of ``ValidationResult`` (what the engine accepts
        after the hook), else ``None``. Observers running after a plugin that wrote
        something else use it to stay out of the way: the engine names that plugin."""
        results = self.results
        if not isinstance(results, list):
            return None
        for result in results:
            if not isinstance(result, ValidationResult):
                return None
        return results


class SamplingIterationPayload(AttemptPayload, ObserveOnlyPayload):
    """Payload of ``sampling_iteration``."""

    hook: ClassVar[HookName] = HookName.SAMPLING_ITERATION

    generation: Generation = Field(description="What the backend returned.")
    text: str = Field(description="The generated text (`generation.text`).")
    validations: list[ValidationResult] = Field(description="One result per requirement.")
    passed: bool = Field(description="Whether every requirement passed.")
    valid_count: int = Field(description="How many requirements passed.")
    total_count: int = Field(description="How many requirements were checked.")
    latency_s: float = Field(description="Backend latency of this attempt, in seconds.")
    usage: Usage = Field(description="Tokens spent by this attempt's generation.")
    cached: bool = Field(
        default=False,
        description="Whether the response cache answered instead of the backend "
        "(`generation.cached`; `usage` then holds no new tokens).",
    )
    stopped_early: bool = Field(
        default=False,
        description="Whether the generation was stopped before its end because the text so "
        "far already failed a requirement (a prefix check): `text` is what arrived.",
    )
    provenance: Provenance = Field(
        default=WHOLE,
        description="How the text came to be: whole; cut by a prefix check (which, and how "
        "much was generated); cached (which entry); answered by a plugin (its name).",
    )


class SamplingRepairPayload(AttemptPayload):
    """Payload of ``sampling_repair``: the failed attempt, and the next attempt's messages."""

    hook: ClassVar[HookName] = HookName.SAMPLING_REPAIR
    writable: ClassVar[frozenset[str]] = frozenset({"messages"})

    text: str = Field(description="The failed attempt's text.")
    validations: list[ValidationResult] = Field(description="The failed attempt's checks.")
    failure_reasons: list[str] = Field(description="Why it failed, one line per failed check.")
    next_attempt: int = Field(description="The attempt number the repaired messages are for.")
    messages: list[Message] = Field(
        description="The strategy's messages for the next attempt. Writable."
    )


class SamplingLoopEndPayload(CallPayload, ObserveOnlyPayload):
    """Payload of ``sampling_loop_end``."""

    hook: ClassVar[HookName] = HookName.SAMPLING_LOOP_END

    success: bool = Field(description="Whether the picked attempt passed every requirement.")
    stop_reason: StopReason = Field(
        description='"success", "budget_exhausted", "stopped_by_plugin" or "error".'
    )
    iterations_used: int = Field(
        description="Completed attempts (generated and validated): `len(attempts)`. On the "
        'error path (`stop_reason="error"`), those completed before the error; attempts whose '
        "backend call raised are counted in `error_count`, not here."
    )
    cancelled: int = Field(description="Attempts in flight when the loop ended.")
    not_started: int = Field(
        default=0,
        description="Subsamples never started: the call was decided before their launch "
        "(`launch` other than `all`).",
    )
    text: str | None = Field(default=None, description="The picked text, or `None`.")
    usage: Usage = Field(
        description="Tokens spent by the call, cancelled attempts included (a count is "
        "`None` when a cancelled attempt's is unknown)."
    )
    cancelled_usage: Usage = Field(
        default_factory=Usage,
        description="What the backend calls cut short by a cancellation spent (in `usage` "
        "too, but in no `generation_post_call`): a streamed call's tokens as they arrived, "
        "any other one's unknown (`None`).",
    )
    loop_budget: int = Field(description="The loop budget the call ran with.")
    concurrency_budget: int = Field(description="The concurrency budget the call ran with.")
    elapsed_s: float = Field(description="Wall time of the call, in seconds.")
    error_count: int = Field(default=0, description="Attempts that ended in a backend error.")
    exception: BaseException | None = Field(
        default=None, description="On the error path: the exception `sample()` raises."
    )
    attempts: list[Attempt] = Field(
        default_factory=list,
        description="Every completed attempt of the call, in `(subsample_index, attempt)` "
        "order (as `result.attempts`), each with its identity fields (`subsample_index`, "
        "`attempt`, `iteration`, `sequence`), `text`, `passed`, `validations` and "
        "`generation`. Read-only, nested values too.",
    )
    picked: int | None = Field(
        default=None,
        description="The `sequence` of the picked attempt (the one `text` is), or `None` "
        "when none was picked (the error path, or no attempt completed).",
    )
    failure_reason: str | None = Field(
        default=None,
        description="`None` on success; else one line: the unmet requirements of the picked "
        "attempt (`unmet requirements: A; B`), `budget exhausted` (no attempt picked), "
        "`stopped by plugin NAME`, or the error (`TypeName: message`).",
    )

    @field_serializer("exception")
    def _exception_as_text(self, exc: BaseException | None) -> str | None:
        return None if exc is None else f"{type(exc).__name__}: {exception_text(exc)}"


class GenerationPreCallPayload(AttemptPayload):
    """Payload of ``generation_pre_call``."""

    hook: ClassVar[HookName] = HookName.GENERATION_PRE_CALL
    writable: ClassVar[frozenset[str]] = frozenset({"messages", "options"})

    messages: list[Message] = Field(description="The messages to send. Writable.")
    options: dict[str, Any] = Field(
        description="Generation options (temperature, max_tokens, seed, stop, ...). Writable."
    )
    retry: int = Field(default=0, description=_RETRY_DOC)
    purpose: Purpose = Field(default="sample", description=_PURPOSE_DOC)


class GenerationPostCallPayload(AttemptPayload, ObserveOnlyPayload):
    """Payload of ``generation_post_call``."""

    hook: ClassVar[HookName] = HookName.GENERATION_POST_CALL

    generation: Generation = Field(description="What the backend returned.")
    latency_s: float = Field(
        description="Backend latency, in seconds: the one the backend reported, else the "
        "engine's measure of the call (`generation.latency_s`)."
    )
    retry: int = Field(default=0, description=_RETRY_DOC)
    purpose: Purpose = Field(default="sample", description=_PURPOSE_DOC)


class GenerationChunkPayload(AttemptPayload, ObserveOnlyPayload):
    """Payload of ``generation_chunk``: one piece of a streamed generation."""

    hook: ClassVar[HookName] = HookName.GENERATION_CHUNK

    delta: str = Field(description="The new text this chunk brought.")
    text: str = Field(description="All the text so far (every `delta` up to this one, joined).")
    index: int = Field(description="0-based number of this chunk within its backend call.")
    retry: int = Field(default=0, description=_RETRY_DOC)
    logprobs: tuple[TokenLogprob, ...] = Field(
        default=(),
        description="The log-probabilities of this chunk's tokens, when the request asked "
        "for them (options `logprobs: true`, `top_logprobs: N`) and the backend gave them.",
    )


class GenerationErrorPayload(AttemptPayload, ObserveOnlyPayload):
    """Payload of ``generation_error``."""

    hook: ClassVar[HookName] = HookName.GENERATION_ERROR

    exception: BaseException = Field(description="What the backend call raised.")
    error_type: str = Field(description="The exception's class name.")
    latency_s: float = Field(
        description="How long the failed backend call ran before it raised, in seconds "
        "(the engine's measure, from the same start as a returned call's)."
    )
    will_retry: bool = Field(description="Whether the transport layer retries this call.")
    retry_in_s: float | None = Field(
        default=None, description="When `will_retry`: the wait before the retry, in seconds."
    )
    retry: int = Field(default=0, description=_RETRY_DOC)
    purpose: Purpose = Field(default="sample", description=_PURPOSE_DOC)

    @field_serializer("exception")
    def _exception_as_text(self, exc: BaseException) -> str:
        return f"{type(exc).__name__}: {exception_text(exc)}"


class SamplingCallPayload(CallPayload, ObserveOnlyPayload):
    """Payload of ``sampling_call``: the call about to run its subsamples and pick.

    A wrapper's ``yield`` gives back the ``SamplingResult`` (sync: the result itself; async:
    a ``pluggy.Result`` holding it)."""

    hook: ClassVar[HookName] = HookName.SAMPLING_CALL
    around: ClassVar[bool] = True

    messages: list[Message] = Field(description="The prompt, as chat messages.")
    requirements: list[str] = Field(description="The description of every requirement.")
    loop_budget: int = Field(
        description="Attempts per subsample (as `sampling_loop_start` left it)."
    )
    concurrency_budget: int = Field(
        description="Subsamples run at once (as `sampling_loop_start` left it)."
    )
    selection: str = Field(description='How the answer is picked: "first" or "ordered".')
    seed: int | None = Field(default=None, description="The call's base seed, if any.")
    options: dict[str, Any] = Field(description="Generation options of the call.")


class GenerationCallPayload(AttemptPayload, ObserveOnlyPayload):
    """Payload of ``generation_call``: one backend call about to be made.

    A plain implementation that returns a ``Generation`` (or a string, or for a streamed
    call chunks) answers instead of the backend; a wrapper's ``yield`` gives back the
    ``Generation`` (sync: itself; async: a ``pluggy.Result`` holding it)."""

    hook: ClassVar[HookName] = HookName.GENERATION_CALL
    around: ClassVar[bool] = True

    messages: list[Message] = Field(
        description="The messages sent, as `generation_pre_call` left them."
    )
    options: dict[str, Any] = Field(
        description="The options sent, as `generation_pre_call` left them."
    )
    streamed: bool = Field(
        default=False,
        description="Whether the engine reads this call as a stream (chunks to "
        "`generation_chunk`, prefix checks): an answering plugin may return chunks.",
    )
    retry: int = Field(default=0, description=_RETRY_DOC)
    purpose: Purpose = Field(default="sample", description=_PURPOSE_DOC)
    json_schema: dict[str, Any] | None = Field(
        default=None,
        description="The JSON schema the answer must follow (`sample(..., format=...)`), which "
        "backends that can constrain their decoding are sent; `None` without a format. With "
        "`messages`, `options` and the attempt's identity, the request the backend is sent.",
    )
    backend: Any = Field(
        default=None,
        exclude=True,
        description="The backend the call goes to (the call's, or a check's own for a judge "
        "call): what a plugin that answers for it may need to know of the model (its "
        "`cache_identity()`, the body its `build_body(request)` sends). Left out of dumps.",
    )
    prefix_checks: frozenset[Any] = Field(
        default=frozenset(),
        exclude=True,
        description="The requirements whose prefix check judges this call as it streams "
        "(early stop on, the call streamed; else none). One that fails the text so far cuts "
        'the generation short (`finish_reason="stopped_early"`), and a whole generation a '
        'plugin answers with `finish_reason="stopped_early"` is judged by them as if it had '
        "streamed. Left out of dumps.",
    )
    ask_again: bool = Field(
        default=False,
        description="The caller asks the backend again (`--resume --retry-failed`, "
        "`sample(..., ask_again=True)`): a plugin that replays earlier answers (a cache) "
        "does not answer this call.",
    )


class GenerationCancelledPayload(AttemptPayload, ObserveOnlyPayload):
    """Payload of ``generation_cancelled``: a backend call that began and was cancelled."""

    hook: ClassVar[HookName] = HookName.GENERATION_CANCELLED

    reason: CancelReason = Field(
        description='Why: "sibling_succeeded" (another attempt won), "stopped_by_plugin" '
        '(`StopSampling`), "budget" (the call needed no more attempts: a launch policy or '
        'vote decided it), "caller_cancelled" (the caller cancelled `sample()`), '
        '"interrupted" (Ctrl-C, or the program exiting) or "error" (a plugin failed '
        "closed, ending the call)."
    )
    text: str | None = Field(
        default=None,
        description="What was generated so far: a streamed call's text as it arrived; "
        "`None` (unknown) for a call that was not streamed.",
    )
    usage: Usage = Field(
        description="Tokens spent so far: a streamed call's count as it arrived; unknown "
        "(`None` counts, never 0) for one that was not streamed."
    )
    latency_s: float = Field(
        description="How long the call ran before it was cancelled, in seconds."
    )
    retry: int = Field(default=0, description=_RETRY_DOC)
    purpose: Purpose = Field(default="sample", description=_PURPOSE_DOC)
