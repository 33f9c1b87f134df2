"""The payloads of the hooks fired around one backend call: ``generation_pre_call``,
``generation_call`` (around the call), ``generation_chunk``, ``generation_post_call``,
``generation_error`` and ``generation_cancelled``."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_serializer

from hook_specs.errors import exception_text
from hook_specs.names import HookName
from hook_specs.payload_base import AttemptPayload, ObserveOnlyPayload
from hook_specs.records import Generation, Message, TokenLogprob, Usage

__all__ = [
    "CancelReason",
    "GenerationCallPayload",
    "GenerationCancelledPayload",
    "GenerationChunkPayload",
    "GenerationErrorPayload",
    "GenerationPostCallPayload",
    "GenerationPreCallPayload",
    "Purpose",
]

CancelReason = Literal[
    "sibling_succeeded", "stopped_by_plugin", "budget", "caller_cancelled", "interrupted", "error"
]
"""Why a backend call that began was cancelled (``generation_cancelled``'s ``reason``)."""


_RETRY_DOC = "0 for the first backend call of the attempt, n for its n-th transport retry."

Purpose = Literal["sample", "judge"]
_PURPOSE_DOC = (
    '"sample" for the attempt\'s own generation; "judge" for a call a check made through the '
    "engine (an LLM-as-judge requirement), which is not an attempt of its own."
)


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
    answered_by: str | None = Field(
        default=None,
        description="The plugin streaming this answer instead of the backend (a "
        "`generation_call` implementation that answered with chunks); `None`: the backend "
        "streams it. A plugin's chunks are no backend call: they spend no token.",
    )


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
        "(`None` counts, never 0) for one that was not streamed; nothing (0, known) when no "
        "backend call was made (`backend_called` false)."
    )
    answered_by: str | None = Field(
        default=None,
        description="The plugin that was answering instead of the backend (streaming its "
        "chunks, or its answer in the hands of `generation_call` wrappers) when the call was "
        "cancelled; `None`: the backend, or nobody yet.",
    )
    backend_called: bool = Field(
        default=True,
        description="Whether the backend itself had been asked: false when a plugin or the "
        "cache was answering instead (`answered_by`), or still working out whether it would, "
        "or the call was cancelled before that (in `generation_pre_call`). False: no backend "
        "call was made.",
    )
    latency_s: float = Field(
        description="How long the call ran before it was cancelled, in seconds."
    )
    retry: int = Field(default=0, description=_RETRY_DOC)
    purpose: Purpose = Field(default="sample", description=_PURPOSE_DOC)
