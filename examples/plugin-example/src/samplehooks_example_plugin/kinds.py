"""The example's kinds: a requirement, a backend and a strategy, added through provider hooks.

Installed, these are usable everywhere samplehooks takes a kind, exactly like the built-ins:

* Python: ``sampling_core.kinds.requirement("starts_with", "Yes")``
* the CLI: ``samplehooks sample "Hi" --backend echo --backend-option upper=true
  --require starts_with:YOU --strategy nudge:word=Kindly``
* a run's YAML: ``backend: {kind: echo, upper: true}``, ``- starts_with: "YOU"``,
  ``strategy: {name: nudge, word: Kindly}``

Options are validated before anything runs: by a pydantic model (``EchoOptions``, given to
``register``) or by the factory's own signature (``starts_with``, ``nudge``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

import anyio
from hook_specs import hookimpl
from pydantic import BaseModel, ConfigDict, Field
from sampling_core import GenerationRequest, RepairTemplate, Requirement, Strategy

# -- a requirement kind: YAML `- starts_with: "Yes"`, CLI `--require starts_with:Yes` --------


def starts_with(prefix: str, *, case_sensitive: bool = False) -> Requirement:
    """The answer starts with ``prefix`` (ignoring case unless ``case_sensitive``)."""

    def check(text: str) -> bool:
        answer = text.strip()
        if case_sensitive:
            return answer.startswith(prefix)
        return answer.lower().startswith(prefix.lower())

    return Requirement(f"starts with {prefix!r}", check)


@hookimpl
def register_requirements(register: Callable[..., None]) -> None:
    """starts_with."""
    register("starts_with", starts_with)


# -- a backend kind with an options model: YAML `backend: {kind: echo, upper: true}` --------


class EchoOptions(BaseModel):
    """The options of backend ``echo``; unknown keys are refused with a did-you-mean."""

    model_config = ConfigDict(extra="forbid")

    prefix: str = "You said:"
    upper: bool = False
    # a throughput option: it may change when a run is resumed (results do not depend on it)
    latency_s: Annotated[float, Field(ge=0, json_schema_extra={"resume": "throughput"})] = 0.0


class EchoBackend:
    """Answers with the prompt repeated after ``prefix`` (offline, deterministic)."""

    def __init__(self, prefix: str = "You said:", upper: bool = False, latency_s: float = 0.0):
        self.prefix = prefix
        self.upper = upper
        self.latency_s = latency_s

    async def generate(self, request: GenerationRequest) -> str:
        """The last user message, echoed."""
        if self.latency_s:
            await anyio.sleep(self.latency_s)
        text = f"{self.prefix} {request.prompt}"
        return text.upper() if self.upper else text


@hookimpl
def register_backends(register: Callable[..., None]) -> None:
    """echo."""
    register("echo", EchoBackend, options=EchoOptions)


# -- a strategy: YAML `strategy: {name: nudge, word: Kindly}`, CLI `--strategy nudge:word=Kindly`


def nudge(word: str = "Please", keep_failures: Annotated[int, Field(ge=1)] = 3) -> Strategy:
    """Repair with a short feedback line that starts with ``word``."""
    return RepairTemplate(f"\n\n{word} fix this: {{reasons}}", keep_failures=keep_failures)


@hookimpl
def register_strategies(register: Callable[..., None]) -> None:
    """nudge."""
    register("nudge", nudge)
