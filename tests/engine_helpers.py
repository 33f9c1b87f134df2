"""Helpers shared by the engine's exact tests: a strict sampler and a check with a reason."""

from __future__ import annotations

from typing import Any

from hook_specs.records import ValidationResult
from sampling_core import Sampler


def strict(backend: Any, *plugins: Any, **kwargs: Any) -> Sampler:
    """A sampler over ``backend`` with ``plugins`` only, whose plugin faults fail the call."""
    return Sampler(backend, plugins=plugins, load_entrypoints=False, strict_plugins=True, **kwargs)


def starts_ok(text: str) -> ValidationResult:
    """starts with ok"""
    passed = text.startswith("ok")
    return ValidationResult(passed, None if passed else "does not start with ok", 1.0 * passed)
