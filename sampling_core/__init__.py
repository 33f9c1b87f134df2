"""samplehooks' engine: concurrent sampling with validation, repair and pluggy hooks.

::

    from sampling_core import ScriptedBackend, sample_sync
    from sampling_core.requirements.checks import contains

    result = sample_sync(
        "Name a colour.",
        backend=ScriptedBackend(["grey", "blue"]),
        requirements=[contains("blue")],
        loop_budget=2,
    )
    assert result.text == "blue"

The public surface: this package's ``__all__``; the modules ``errors``, ``kinds``,
``strategies``, ``testing``, ``pricing`` and ``redaction`` (each one's ``__all__``); and the
subpackages ``backends``, ``requirements``, ``events``, ``runs``, ``cli`` and ``view`` (each
package's ``__all__``). Internal: the subpackages ``engine`` and ``hooks`` (their names that
users need are here) and ``pytest_plugin`` (loaded by pytest, its fixtures documented in
``docs/testing.md``).
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hook_specs.errors import StopSampling
    from hook_specs.records import Attempt, Generation, IterationInfo, Usage, ValidationResult
    from sampling_core.backends import AttemptTimeout, Backend, GenerationRequest, ScriptedBackend
    from sampling_core.backends.transport import RetryPolicy, TransientBackendError
    from sampling_core.engine.context import current_iteration
    from sampling_core.engine.default import sample, sample_sync
    from sampling_core.engine.results import AttemptError, SamplingResult
    from sampling_core.engine.sampler import Sampler
    from sampling_core.errors import BudgetError, PluginError, SamplehooksError
    from sampling_core.hooks.faults import PluginFault
    from sampling_core.requirements.checks import Requirement
    from sampling_core.requirements.context import CheckContext
    from sampling_core.strategies import (
        BestOfN,
        MajorityVote,
        MultiTurn,
        RejectionSampling,
        RepairTemplate,
        Strategy,
    )

# Names are imported on first use (PEP 562), so importing a submodule -- the pytest
# plugin at every pytest start, the CLI's parts -- does not import the whole engine.
_EXPORTS = {
    "Attempt": "hook_specs.records",
    "AttemptError": "sampling_core.engine.results",
    "AttemptTimeout": "sampling_core.backends",
    "Backend": "sampling_core.backends",
    "BestOfN": "sampling_core.strategies",
    "BudgetError": "sampling_core.errors",
    "CheckContext": "sampling_core.requirements.context",
    "current_iteration": "sampling_core.engine.context",
    "Generation": "hook_specs.records",
    "GenerationRequest": "sampling_core.backends",
    "IterationInfo": "hook_specs.records",
    "MajorityVote": "sampling_core.strategies",
    "MultiTurn": "sampling_core.strategies",
    "PluginError": "sampling_core.errors",
    "PluginFault": "sampling_core.hooks.faults",
    "RejectionSampling": "sampling_core.strategies",
    "RepairTemplate": "sampling_core.strategies",
    "Requirement": "sampling_core.requirements.checks",
    "RetryPolicy": "sampling_core.backends.transport",
    "sample": "sampling_core.engine.default",
    "sample_sync": "sampling_core.engine.default",
    "SamplehooksError": "sampling_core.errors",
    "Sampler": "sampling_core.engine.sampler",
    "SamplingResult": "sampling_core.engine.results",
    "ScriptedBackend": "sampling_core.backends",
    "StopSampling": "hook_specs.errors",
    "Strategy": "sampling_core.strategies",
    "TransientBackendError": "sampling_core.backends.transport",
    "Usage": "hook_specs.records",
    "ValidationResult": "hook_specs.records",
}

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


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'sampling_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
