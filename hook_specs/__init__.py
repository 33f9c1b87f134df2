"""The samplehooks hook contract: markers, hook specifications, payloads and their values.

Plugins import from here::

    from hook_specs import hookimpl

    class Counter:
        @hookimpl
        def sampling_iteration(self, payload):
            print(payload.iteration, payload.passed)

This package's ``__all__`` is the contract's public surface. Its modules (``names``,
``specs``, ``payloads``, ``records``, ``contract``, ``markers``, ``errors``, ``frozen``) are
how the contract is organised: import from the package.
"""

from hook_specs import specs
from hook_specs.contract import (
    CALL_HOOKS,
    OBSERVE_ONLY_HOOKS,
    PAYLOAD_TYPES,
    WRITABLE_HOOKS,
    may_write,
)
from hook_specs.errors import ReadOnlyFieldError, StopSampling
from hook_specs.markers import PROJECT_NAME, background, hookimpl, hookspec
from hook_specs.names import HookName
from hook_specs.payloads import (
    AttemptPayload,
    CallPayload,
    CancelReason,
    GenerationCallPayload,
    GenerationCancelledPayload,
    GenerationChunkPayload,
    GenerationErrorPayload,
    GenerationPostCallPayload,
    GenerationPreCallPayload,
    HookPayload,
    ObserveOnlyPayload,
    SamplingCallPayload,
    SamplingIterationPayload,
    SamplingLoopEndPayload,
    SamplingLoopStartPayload,
    SamplingRepairPayload,
    SamplingValidatePayload,
    StopReason,
)
from hook_specs.records import (
    Attempt,
    CachedGeneration,
    Generation,
    IterationInfo,
    Message,
    Provenance,
    TokenLogprob,
    Usage,
    ValidationResult,
)
from hook_specs.run_payloads import (
    PromptEndPayload,
    PromptStartPayload,
    RunEndPayload,
    RunPayload,
    RunStartPayload,
)

__all__ = [
    "CALL_HOOKS",
    "OBSERVE_ONLY_HOOKS",
    "PAYLOAD_TYPES",
    "WRITABLE_HOOKS",
    "PROJECT_NAME",
    "Attempt",
    "AttemptPayload",
    "CachedGeneration",
    "CallPayload",
    "CancelReason",
    "Generation",
    "GenerationCallPayload",
    "GenerationCancelledPayload",
    "GenerationChunkPayload",
    "GenerationErrorPayload",
    "GenerationPostCallPayload",
    "GenerationPreCallPayload",
    "HookName",
    "HookPayload",
    "IterationInfo",
    "Message",
    "ObserveOnlyPayload",
    "PromptEndPayload",
    "PromptStartPayload",
    "Provenance",
    "ReadOnlyFieldError",
    "RunEndPayload",
    "RunPayload",
    "RunStartPayload",
    "SamplingCallPayload",
    "SamplingIterationPayload",
    "SamplingValidatePayload",
    "SamplingLoopEndPayload",
    "SamplingLoopStartPayload",
    "SamplingRepairPayload",
    "StopReason",
    "StopSampling",
    "TokenLogprob",
    "Usage",
    "ValidationResult",
    "background",
    "hookimpl",
    "hookspec",
    "may_write",
    "specs",
]
