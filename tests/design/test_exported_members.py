"""The public surface, stated and held (as httpx's ``tests/test_exported_members.py``).

Each public package's ``__all__`` is pinned to an explicit list, so a change to what users
may import is made on purpose, here; every name listed imports; the documented public names
import from their documented paths; and every package says which of its modules are public.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import builtin_plugins
import hook_specs
import sampling_core

EXPECTED: dict[str, list[str]] = {
    "sampling_core": [
        "Attempt", "AttemptError", "AttemptTimeout", "Backend", "BestOfN", "BudgetError",
        "CheckContext", "Generation", "GenerationRequest", "IterationInfo", "MajorityVote",
        "MultiTurn", "PluginError", "PluginFault", "RejectionSampling", "RepairTemplate",
        "Requirement", "RetryPolicy", "SamplehooksError", "Sampler", "SamplingResult",
        "ScriptedBackend", "StopSampling", "Strategy", "TransientBackendError", "Usage",
        "ValidationResult", "current_iteration", "sample", "sample_sync",
    ],
    "sampling_core.errors": [
        "BudgetError", "CheckCallFailed", "PluginError", "SamplehooksError", "StopSampling",
        "StrategyError", "exception_text",
    ],
    "sampling_core.backends": [
        "AttemptTimeout", "Backend", "CacheError", "Chunk", "GenerationRequest",
        "LocalBackend", "OpenAIBackend", "ResponseCache", "ScriptedBackend", "StreamingBackend",
        "cache_identity",
    ],
    "sampling_core.requirements": [
        "CannotDecide", "Check", "CheckContext", "Prefix", "Requirement",
        "ValidationResult", "as_requirements", "contains", "contains_field", "equals_field",
        "is_json", "llm_judge", "matches", "matches_schema", "max_chars", "max_words",
        "min_words", "normalize_text", "not_contains", "parses_as",
    ],
    "sampling_core.events": [
        "NO_CALL", "EventFileError", "RecordedAttempt", "RecordedCall", "is_recorded_event",
        "iter_calls", "numbered_events", "read_calls", "read_events",
    ],
    "sampling_core.runs": [
        "AttemptEntry", "ConfigError", "DatasetError", "ResumeRefused", "RunComparison",
        "RunConfig", "RunDirError", "RunError", "RunRecord", "RunSummary", "classified_fields",
        "compare_runs", "load_config", "parse_config", "read_record", "rescore", "rescore_sync",
        "run_batch", "run_batch_sync", "summarize",
    ],
    "sampling_core.cli": ["app", "main"],
    "sampling_core.view": ["build_page", "page_data", "render_page", "run_data"],
    "hook_specs": [
        "OBSERVE_ONLY_HOOKS", "PAYLOAD_TYPES", "WRITABLE_HOOKS", "PROJECT_NAME", "Attempt",
        "AttemptPayload", "CachedGeneration", "CallPayload", "Generation",
        "GenerationChunkPayload", "GenerationErrorPayload", "GenerationPostCallPayload",
        "GenerationPreCallPayload", "HookName", "HookPayload", "IterationInfo", "Message",
        "ObserveOnlyPayload", "PromptEndPayload", "PromptStartPayload", "Provenance",
        "ReadOnlyFieldError",
        "RunEndPayload", "RunPayload", "RunStartPayload", "SamplingIterationPayload",
        "SamplingValidatePayload",
        "SamplingLoopEndPayload", "SamplingLoopStartPayload", "SamplingRepairPayload",
        "StopReason", "StopSampling", "TokenLogprob", "Usage", "ValidationResult", "background",
        "hookimpl", "hookspec", "may_write", "specs",
        # the call hooks
        "CALL_HOOKS", "CancelReason", "GenerationCallPayload", "GenerationCancelledPayload",
        "SamplingCallPayload",
    ],
    "builtin_plugins": [
        "budget_guard", "cache", "kinds", "llm_bridge", "mlflow_export", "ordering", "progress",
        "recorder", "tracing",
    ],
    "builtin_plugins.cache": ["NO_NEW_TOKENS", "ResponseCachePlugin", "default_path"],
    "builtin_plugins.tracing": ["EVENT_NAMES", "LOGGER_NAME", "TracingPlugin"],
    "builtin_plugins.ordering": [
        "AttemptSkip", "OrderingChecker", "OrderingReport", "OrderingViolation",
        "PROBLEM_KINDS", "Violation",
    ],
    "builtin_plugins.budget_guard": ["ENV_VAR", "PROCESS_TOTALS", "BudgetGuard", "Totals"],
    "builtin_plugins.progress": ["ProgressPlugin"],
    "builtin_plugins.recorder": ["DEFAULT_PATH", "EventFileError", "RecorderPlugin", "read_events"],
    "builtin_plugins.otel": ["CANCELLED", "EVALUATION_EVENT", "OtelPlugin"],
    "builtin_plugins.mlflow_export": [
        "RUN_DIR_TAG", "RUN_ID_TAG", "MlflowExporter", "metrics_of", "status_of",
    ],
    "builtin_plugins.kinds": [
        "register_backends", "register_requirements", "register_scorers", "register_strategies",
    ],
    "builtin_plugins.llm_bridge": ["LLMBackend", "register_backends"],
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(EXPECTED))
def test_each_public_package_states_its_surface(module: str) -> None:
    stated = importlib.import_module(module).__all__
    assert len(set(stated)) == len(stated), f"{module}.__all__ names something twice"
    assert sorted(stated) == sorted(EXPECTED[module]), (
        f"{module}.__all__ changed: if that is meant, change EXPECTED here too"
    )


@pytest.mark.parametrize("module", sorted(EXPECTED))
def test_every_name_in_all_imports(module: str) -> None:
    namespace: dict[str, object] = {}
    exec(f"from {module} import *", namespace)
    assert set(EXPECTED[module]) <= set(namespace)


PUBLIC_NAMES = """
from sampling_core import (
    sample, sample_sync, Sampler,
    Requirement, ValidationResult,
    RejectionSampling, RepairTemplate, MultiTurn, BestOfN, MajorityVote,
    SamplingResult, Attempt, IterationInfo, current_iteration,
    GenerationRequest, Generation, ScriptedBackend,
    BudgetError, PluginError, StopSampling, CheckContext,
)
from hook_specs import hookimpl, hookspec, HookName, background
from builtin_plugins.tracing import TracingPlugin
from builtin_plugins.ordering import OrderingChecker
from sampling_core.backends import OpenAIBackend, LocalBackend
"""


def test_the_documented_public_names_import_from_their_documented_paths() -> None:
    namespace: dict[str, object] = {}
    exec(PUBLIC_NAMES, namespace)
    assert callable(namespace["sample"]) and callable(namespace["OrderingChecker"])
    from hook_specs import HookName

    for member in (
        "SAMPLING_LOOP_START", "SAMPLING_ITERATION", "SAMPLING_REPAIR", "SAMPLING_LOOP_END",
        "GENERATION_PRE_CALL", "GENERATION_POST_CALL", "GENERATION_ERROR", "SAMPLING_VALIDATE",
    ):  # fmt: skip
        assert HookName[member].value == member.lower()
    from sampling_core import Sampler

    for method in ("sample", "aclose", "register"):
        assert callable(getattr(Sampler, method))
    from hook_specs import SamplingLoopEndPayload

    assert {"attempts", "picked", "failure_reason"} <= set(SamplingLoopEndPayload.model_fields)


def _packages() -> list[str]:
    found = []
    for root in (sampling_core, hook_specs, builtin_plugins):
        found.append(root.__name__)
        for info in pkgutil.walk_packages(root.__path__, f"{root.__name__}."):
            if info.ispkg:
                found.append(info.name)
    return found


@pytest.mark.parametrize("package", _packages())
def test_every_package_says_which_of_its_modules_are_public(package: str) -> None:
    doc = " ".join((importlib.import_module(package).__doc__ or "").split())
    internal = "Internal:" in doc
    stated = "``__all__``" in doc and "public surface" in doc
    assert internal or stated, f"{package}'s docstring does not say what is public"
