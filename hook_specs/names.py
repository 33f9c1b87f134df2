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

    def __str__(self) -> str:
        return self.value

    @property
    def may_change_payload(self) -> bool:
        """Whether plugins may write to this hook's payload (a fault there fails closed).

        Read from the payload class's ``writable`` fields: the one place that rule lives.
        """
        from hook_specs.payloads import PAYLOAD_TYPES  # the payloads import this module

        return bool(PAYLOAD_TYPES[self].writable)
