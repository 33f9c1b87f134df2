"""Helpers shared by the engine's tests: a strict sampler, a check with a reason, the fields of
recorded payloads (checked to be exactly their payload model's fields), and a scripted race
with an attempt cancelled in flight."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from hook_specs import HookName
from hook_specs.contract import PAYLOAD_TYPES
from hook_specs.records import ValidationResult
from sampling_core import GenerationRequest, RetryPolicy, Sampler
from sampling_core.testing import HookEvent, HookRecorder

# The hooks of one backend call (an attempt's or a check's own).
BACKEND_CALLS = (
    HookName.GENERATION_PRE_CALL,
    HookName.GENERATION_POST_CALL,
    HookName.GENERATION_ERROR,
)


RETRY = RetryPolicy(max_retries=2, base_delay=0.001, max_delay=0.01, jitter=0.0)
"""Transport retries fast enough for tests: two, a millisecond apart, no jitter."""


def passes(text: str) -> bool:
    """starts with ok"""
    return text.startswith("ok")


def never(text: str) -> bool:
    """never passes"""
    return False


def strict(backend: Any, *plugins: Any, **kwargs: Any) -> Sampler:
    """A sampler over ``backend`` with ``plugins`` only, whose plugin faults fail the call."""
    return Sampler(backend, plugins=plugins, load_entrypoints=False, strict_plugins=True, **kwargs)


def starts_ok(text: str) -> ValidationResult:
    """starts with ok"""
    passed = text.startswith("ok")
    return ValidationResult(passed, None if passed else "does not start with ok", 1.0 * passed)


def exact_fields(event: HookEvent) -> dict[str, Any]:
    """The event's snapshot of its payload, which must hold exactly the payload model's fields."""
    assert set(event.fields) == set(PAYLOAD_TYPES[event.hook].model_fields)
    return event.fields


def fields_of(recorder: HookRecorder, hook: HookName) -> list[dict[str, Any]]:
    """The :func:`exact_fields` of every event of ``hook``, in the order fired."""
    return [exact_fields(event) for event in recorder.for_hook(hook)]


def events_of(recorder: HookRecorder, *hooks: HookName) -> list[tuple[str, dict[str, Any]]]:
    """``(hook name, exact fields)`` of every event of ``hooks``, in the order fired."""
    return [(event.name, exact_fields(event)) for event in recorder if event.hook in hooks]


def race(
    winner: tuple[int, int], hanging: int, *, first: tuple[int, int]
) -> Callable[[GenerationRequest], Awaitable[str]]:
    """A scripted backend's replies for a race in which one attempt is cancelled in flight.

    The attempt ``winner`` (``(subsample_index, attempt)``) answers "yes", every other one
    "no"; subsample ``hanging`` never answers, so its attempt is in flight when the winner
    passes and is cancelled. The attempt ``first`` yields once before it answers, so that the
    hanging subsample has started meanwhile.
    """
    never = anyio.Event()

    async def reply(request: GenerationRequest) -> str:
        info = request.iteration
        if (info.subsample_index, info.attempt) == first:
            await anyio.sleep(0)
        if info.subsample_index == hanging:
            await never.wait()
        return "yes" if (info.subsample_index, info.attempt) == winner else "no"

    return reply


def hook_sequence(attempts: int, chunks: int = 1) -> list[str]:
    """The hooks a call of one subsample fires for ``attempts`` attempts, in the engine's order
    (docs/concepts.md): loop start, the call hook around the work; each attempt's backend
    call (pre, the call hook around it, ``chunks`` chunks of
    its streamed answer -- someone listening to every hook streams it -- then post), checks
    (``sampling_validate``) and ``sampling_iteration``, with a repair before each next one;
    loop end."""
    one = [
        "generation_pre_call",
        "generation_call",
        *["generation_chunk"] * chunks,
        "generation_post_call",
        "sampling_validate",
        "sampling_iteration",
    ]
    names = ["sampling_loop_start", "sampling_call", *one]
    for _ in range(attempts - 1):
        names += ["sampling_repair", *one]
    return [*names, "sampling_loop_end"]
