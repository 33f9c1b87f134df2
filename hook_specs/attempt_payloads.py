"""The payloads of the hooks fired once per attempt, after its generation:
``sampling_validate`` (its verdicts, writable), ``sampling_iteration`` (the attempt as
recorded) and ``sampling_repair`` (the next attempt's messages, writable)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from hook_specs.names import HookName
from hook_specs.payload_base import AttemptPayload, ObserveOnlyPayload
from hook_specs.records import WHOLE, Generation, Message, Provenance, Usage, ValidationResult

__all__ = ["SamplingIterationPayload", "SamplingRepairPayload", "SamplingValidatePayload"]


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
