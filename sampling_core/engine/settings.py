"""``CallSettings``: what one ``sample()`` call is asked to do, validated by the ``Sampler``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hook_specs.records import Message
from sampling_core.backends.base import Backend
from sampling_core.backends.transport import RetryPolicy
from sampling_core.engine.budgets import BudgetCaps
from sampling_core.requirements.checks import Requirement
from sampling_core.strategies import Strategy


@dataclass(slots=True)
class CallSettings:
    """What one call is asked to do, already validated by the ``Sampler``."""

    sampling_id: str
    backend: Backend
    messages: list[Message]
    requirements: tuple[Requirement, ...]
    strategy: Strategy
    loop_budget: int
    concurrency_budget: int
    selection: str
    seed: int | None
    options: dict[str, Any]
    format: Any
    retry: RetryPolicy
    attempt_timeout: float | None
    caps: BudgetCaps
    early_exit: bool = True
    check_timeout: float | None = None
    row: Mapping[str, Any] | None = None  # the dataset line checks see (CheckContext.row)
