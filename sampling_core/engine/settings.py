"""``CallSettings``: what one ``sample()`` call is asked to do, validated by the ``Sampler``;
``TokenSettings``: how it spends fewer tokens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hook_specs.records import Message
from sampling_core.backends.base import Backend
from sampling_core.backends.transport import RetryPolicy
from sampling_core.engine.budgets import BudgetCaps
from sampling_core.engine.launch import DEFAULT_STAGGER_S, check_launch
from sampling_core.requirements.checks import Requirement
from sampling_core.requirements.formats import format_schema
from sampling_core.strategies import Strategy


@dataclass(frozen=True, slots=True)
class TokenSettings:
    """How a call spends fewer tokens: early stop, when its subsamples start, and the JSON
    schema sent to backends that can constrain their decoding to it."""

    early_stop: bool = True
    launch: str = "all"
    stagger_s: float = DEFAULT_STAGGER_S
    json_schema: dict[str, Any] | None = None


DEFAULT_TOKENS = TokenSettings()
"""Every call that asks for nothing else shares these (the ``Sampler`` builds no other)."""


def token_settings(early_stop: Any, launch: Any, stagger_s: Any, format: Any) -> TokenSettings:
    """The token settings ``sample()`` was given, checked: ``TypeError`` / ``ValueError``
    naming the argument."""
    if early_stop is not True and early_stop is not False:
        raise TypeError(f"early_stop must be a bool, not {type(early_stop).__name__}")
    return TokenSettings(
        early_stop,
        launch,
        check_launch(launch, stagger_s),
        None if format is None else format_schema(format),
    )


def asked_options(
    requirements: Sequence[Requirement], options: Mapping[str, Any]
) -> dict[str, Any]:
    """The call's backend options with what its requirements ask for (``asks``) added
    where the call does not set the option itself."""
    asked: dict[str, Any] | None = None
    for requirement in requirements:
        if requirement.asks:
            asked = {**(asked or {}), **requirement.asks}
    return {**asked, **options} if asked else dict(options)


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
    tokens: TokenSettings = DEFAULT_TOKENS  # early stop, launch policy, format's schema
