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
    GENERATION_CHUNK = "generation_chunk"
    SAMPLING_CALL = "sampling_call"
    GENERATION_CALL = "generation_call"
    GENERATION_CANCELLED = "generation_cancelled"
    SAMPLING_VALIDATE = "sampling_validate"
    RUN_START = "run_start"
    PROMPT_START = "prompt_start"
    PROMPT_END = "prompt_end"
    RUN_END = "run_end"
    REGISTER_REQUIREMENTS = "register_requirements"
    REGISTER_BACKENDS = "register_backends"
    REGISTER_STRATEGIES = "register_strategies"
    REGISTER_SCORERS = "register_scorers"

    def __str__(self) -> str:
        return self.value

    @property
    def is_provider(self) -> bool:
        """Whether this is a provider hook (``register_*``): called with ``register``, once
        per process when kinds are collected, never during a ``sample()`` call."""
        return self in PROVIDER_HOOKS

    @property
    def is_run(self) -> bool:
        """Whether this is a run hook (``run_start``, ``prompt_start``, ``prompt_end``,
        ``run_end``): fired by a batch run around its ``sample()`` calls, never by a call."""
        return self in RUN_HOOKS

    @classmethod
    def fired(cls) -> tuple[HookName, ...]:
        """The hooks fired with a payload: every member but the provider hooks (the
        per-call hooks and the run hooks)."""
        return tuple(hook for hook in cls if hook not in PROVIDER_HOOKS)

    @classmethod
    def per_call(cls) -> tuple[HookName, ...]:
        """The hooks fired during ``sample()`` calls (neither provider nor run hooks)."""
        return tuple(hook for hook in cls.fired() if hook not in RUN_HOOKS)

    @classmethod
    def run(cls) -> tuple[HookName, ...]:
        """The run hooks, in the order a batch run fires them."""
        return tuple(hook for hook in cls if hook in RUN_HOOKS)


PROVIDER_HOOKS = frozenset(
    {
        HookName.REGISTER_REQUIREMENTS,
        HookName.REGISTER_BACKENDS,
        HookName.REGISTER_STRATEGIES,
        HookName.REGISTER_SCORERS,
    }
)
"""The provider hooks: they add kinds (requirements, backends, strategies, scorers) by name."""

RUN_HOOKS = frozenset(
    {HookName.RUN_START, HookName.PROMPT_START, HookName.PROMPT_END, HookName.RUN_END}
)
"""The run hooks: fired by a batch run (``samplehooks run``, ``run_batch``) around its calls."""
