"""The payloads of the hooks fired once per ``sample()`` call: ``sampling_loop_start``,
``sampling_call`` (around the call's subsamples and pick) and ``sampling_loop_end``."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_serializer

from hook_specs.errors import exception_text
from hook_specs.names import HookName
from hook_specs.payload_base import CallPayload, ObserveOnlyPayload
from hook_specs.records import Attempt, Message, Usage

__all__ = [
    "SamplingCallPayload",
    "SamplingLoopEndPayload",
    "SamplingLoopStartPayload",
    "StopReason",
]

StopReason = Literal["success", "budget_exhausted", "stopped_by_plugin", "error"]


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
