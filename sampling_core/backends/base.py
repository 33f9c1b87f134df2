"""What a backend is: anything with ``async def generate(request) -> Generation``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import anyio

from hook_specs.records import Generation, IterationInfo, Message


@dataclass(slots=True)
class GenerationRequest:
    """One call to a backend: the messages, the options, and the attempt it belongs to."""

    messages: list[Message]
    options: dict[str, Any] = field(default_factory=dict)
    iteration: IterationInfo | None = None

    @property
    def prompt(self) -> str:
        """The content of the last user message (handy in scripted backends)."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return str(message.get("content", ""))
        return ""


@runtime_checkable
class Backend(Protocol):
    """A model the engine can call. It may return a plain ``str``; the engine wraps it."""

    async def generate(self, request: GenerationRequest) -> Generation | str:
        """Generate one answer for ``request``."""
        ...


class AttemptTimeout(TimeoutError):
    """A backend call ran longer than the sampler's ``attempt_timeout`` (a transient failure)."""


async def generate_within(timeout: float, backend: Backend, request: GenerationRequest) -> Any:
    """``backend.generate(request)``, cut off after ``timeout`` seconds with AttemptTimeout."""
    with anyio.move_on_after(timeout) as scope:
        return await backend.generate(request)
    if scope.cancelled_caught:
        raise AttemptTimeout(f"the backend call took longer than {timeout:g}s")
    raise AssertionError("unreachable")  # pragma: no cover


def as_generation(reply: Any, latency: float) -> Generation:
    """What a backend returned, as a :class:`Generation` (a plain ``str`` is wrapped).

    ``latency`` (measured by the engine) fills in a generation that reports none.
    """
    if isinstance(reply, Generation):
        if not reply.latency_s:
            reply.latency_s = latency
        return reply
    if isinstance(reply, str):
        return Generation(text=reply, latency_s=latency)
    raise TypeError(
        f"backend returned {type(reply).__name__}; generate() must return a Generation or a str"
    )


async def aclose_backend(backend: object) -> None:
    """Free what ``backend`` holds (its ``aclose()``, if it has one), even while cancelled."""
    close = getattr(backend, "aclose", None)
    if close is not None:
        with anyio.CancelScope(shield=True):
            await close()
