"""What the contract derives from its three parts: each hook's payload model and whether
plugins may write to it.

A hook is declared by three edits: its ``HookName`` member (:mod:`hook_specs.names`), its
payload model (:mod:`hook_specs.payloads`, with ``hook`` set to that member and
``writable`` naming what plugins may change) and its spec (:mod:`hook_specs.specs`, whose
``payload`` parameter is annotated with that model). Everything else -- which hooks may
write, which take ``@background`` observers, the engine's routes and firing flags, the
hook reference -- is read from here.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from types import MappingProxyType

from hook_specs import specs
from hook_specs.names import HookName
from hook_specs.payload_base import HookPayload

__all__ = ["CALL_HOOKS", "OBSERVE_ONLY_HOOKS", "PAYLOAD_TYPES", "WRITABLE_HOOKS", "may_write"]


def _payload_types() -> Mapping[HookName, type[HookPayload]]:
    """Each fired hook's payload model, read from its spec's ``payload`` annotation."""
    found: dict[HookName, type[HookPayload]] = {}
    for hook in HookName.fired():
        spec = getattr(specs, hook.value, None)
        if spec is None:
            raise TypeError(f"HookName.{hook.name} has no spec in hook_specs.specs")
        model = typing.get_type_hints(spec).get("payload")
        if not (isinstance(model, type) and issubclass(model, HookPayload)):
            raise TypeError(f"spec {hook.value}: annotate `payload` with its payload model")
        if model.__dict__.get("hook") is not hook:
            raise TypeError(f"{model.__name__}.hook must be HookName.{hook.name}")
        found[hook] = model
    return MappingProxyType(found)


PAYLOAD_TYPES: Mapping[HookName, type[HookPayload]] = _payload_types()
"""The payload model of every hook fired with a payload (per-call and run hooks)."""

WRITABLE_HOOKS: frozenset[HookName] = frozenset(
    hook for hook, model in PAYLOAD_TYPES.items() if model.writable
)
"""The hooks whose payload plugins may change (a fault there fails closed)."""

CALL_HOOKS: frozenset[HookName] = frozenset(
    hook for hook, model in PAYLOAD_TYPES.items() if model.around
)
"""The hooks fired around a piece of work (``sampling_call``, ``generation_call``): the only
ones that take ``@hookimpl(wrapper=True)`` implementations. What their implementations
raise is the outcome of the work they wrap (nothing is isolated); ``@background`` is refused."""

OBSERVE_ONLY_HOOKS: frozenset[HookName] = frozenset(PAYLOAD_TYPES) - WRITABLE_HOOKS - CALL_HOOKS
"""The hooks plugins only watch (a fault there is isolated; ``@background`` is allowed)."""


def may_write(hook: HookName | str) -> bool:
    """Whether plugins may write to ``hook``'s payload."""
    return hook in WRITABLE_HOOKS
