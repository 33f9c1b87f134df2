"""``HookName``: every hook of the contract, by the name of its hook function."""

from __future__ import annotations

from enum import StrEnum


class HookName(StrEnum):
    """The hooks a plugin can implement. A member's value is the hook function's name."""

    SAMPLING_LOOP_START = "sampling_loop_start"
    SAMPLING_ITERATION = "sampling_iteration"
    SAMPLING_REPAIR = "sampling_repair"
    SAMPLING_LOOP_END = "sampling_loop_end"
    GENERATION_PRE_CALL = "generation_pre_call"
    GENERATION_POST_CALL = "generation_post_call"
    GENERATION_ERROR = "generation_error"
    SAMPLING_VALIDATE = "sampling_validate"
    REGISTER_REQUIREMENTS = "register_requirements"
    REGISTER_BACKENDS = "register_backends"
    REGISTER_STRATEGIES = "register_strategies"

    def __str__(self) -> str:
        return self.value

    @property
    def is_provider(self) -> bool:
        """Whether this is a provider hook (``register_*``): called with ``register``, once
        per process when kinds are collected, never during a ``sample()`` call."""
        return self in PROVIDER_HOOKS

    @classmethod
    def per_call(cls) -> tuple[HookName, ...]:
        """The hooks fired during ``sample()`` calls (every member but the provider hooks)."""
        return tuple(hook for hook in cls if hook not in PROVIDER_HOOKS)


PROVIDER_HOOKS = frozenset(
    {HookName.REGISTER_REQUIREMENTS, HookName.REGISTER_BACKENDS, HookName.REGISTER_STRATEGIES}
)
"""The provider hooks: they add kinds (requirements, backends, strategies) by name."""
