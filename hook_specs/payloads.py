"""The payload of every hook: one pydantic model per hook, gathered from the modules that
hold them (import them from here, or from :mod:`hook_specs`).

- :mod:`hook_specs.payload_base`: what every payload is (:class:`HookPayload`,
  :class:`ObserveOnlyPayload`) and the identity fields of per-call payloads
  (:class:`CallPayload`, :class:`AttemptPayload`);
- :mod:`hook_specs.call_payloads`: once per ``sample()`` call (``sampling_loop_start``,
  ``sampling_call``, ``sampling_loop_end``);
- :mod:`hook_specs.attempt_payloads`: once per attempt, after its generation
  (``sampling_validate``, ``sampling_iteration``, ``sampling_repair``);
- :mod:`hook_specs.generation_payloads`: around one backend call (``generation_pre_call``,
  ``generation_call``, ``generation_chunk``, ``generation_post_call``, ``generation_error``,
  ``generation_cancelled``);
- :mod:`hook_specs.run_payloads`: the run hooks of a batch run.
"""

from __future__ import annotations

from hook_specs.attempt_payloads import (
    SamplingIterationPayload,
    SamplingRepairPayload,
    SamplingValidatePayload,
)
from hook_specs.call_payloads import (
    SamplingCallPayload,
    SamplingLoopEndPayload,
    SamplingLoopStartPayload,
    StopReason,
)
from hook_specs.generation_payloads import (
    CancelReason,
    GenerationCallPayload,
    GenerationCancelledPayload,
    GenerationChunkPayload,
    GenerationErrorPayload,
    GenerationPostCallPayload,
    GenerationPreCallPayload,
    Purpose,
)
from hook_specs.payload_base import (
    AttemptPayload,
    CallPayload,
    HookPayload,
    ObserveOnlyPayload,
    credit_writes,
)

__all__ = [
    "AttemptPayload",
    "CallPayload",
    "CancelReason",
    "GenerationCallPayload",
    "GenerationCancelledPayload",
    "GenerationChunkPayload",
    "GenerationErrorPayload",
    "GenerationPostCallPayload",
    "GenerationPreCallPayload",
    "HookPayload",
    "ObserveOnlyPayload",
    "Purpose",
    "SamplingCallPayload",
    "SamplingIterationPayload",
    "SamplingLoopEndPayload",
    "SamplingLoopStartPayload",
    "SamplingRepairPayload",
    "SamplingValidatePayload",
    "StopReason",
    "credit_writes",
]
