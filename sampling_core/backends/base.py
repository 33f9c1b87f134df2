"""What a backend is: anything with ``async def generate(request) -> Generation``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

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
