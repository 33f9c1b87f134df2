"""samplehooks' engine: concurrent sampling with validation, repair and pluggy hooks.

::

    from sampling_core import ScriptedBackend, sample_sync
    from sampling_core.requirements import contains

    result = sample_sync(
        "Name a colour.",
        backend=ScriptedBackend(["grey", "blue"]),
        requirements=[contains("blue")],
        loop_budget=2,
    )
    assert result.text == "blue"
"""

from hook_specs.errors import StopSampling
from hook_specs.records import Attempt, Generation, IterationInfo, Usage, ValidationResult
from sampling_core.backends import AttemptTimeout, Backend, GenerationRequest, ScriptedBackend
from sampling_core.check_context import CheckContext
from sampling_core.context import current_iteration
from sampling_core.dispatch import PluginFault
from sampling_core.errors import BudgetError, PluginError, SamplehooksError
from sampling_core.requirements import Requirement
from sampling_core.results import AttemptError, SamplingResult
from sampling_core.sampler import Sampler, sample, sample_sync
from sampling_core.strategies import (
    BestOfN,
    MajorityVote,
    MultiTurn,
    RejectionSampling,
    RepairTemplate,
    Strategy,
)
from sampling_core.transport import RetryPolicy, TransientBackendError

__all__ = [
    "Attempt",
    "AttemptError",
    "AttemptTimeout",
    "Backend",
    "BestOfN",
    "BudgetError",
    "CheckContext",
    "Generation",
    "GenerationRequest",
    "IterationInfo",
    "MajorityVote",
    "MultiTurn",
    "PluginError",
    "PluginFault",
    "RejectionSampling",
    "RepairTemplate",
    "Requirement",
    "RetryPolicy",
    "SamplehooksError",
    "Sampler",
    "SamplingResult",
    "ScriptedBackend",
    "StopSampling",
    "Strategy",
    "TransientBackendError",
    "Usage",
    "ValidationResult",
    "current_iteration",
    "sample",
    "sample_sync",
]
