"""Backends: the protocol, the scripted test double, and (with extras) real models.

``OpenAIBackend`` needs the ``openai`` extra and ``LocalBackend`` the ``local`` extra;
both are imported on first access. This package's ``__all__`` is its public surface; its
modules (``base``, ``scripted``, ``openai_compat``, ``local``, ``limits``, ``transport``) are
internal.
"""

from __future__ import annotations

from typing import Any

from sampling_core.backends.base import AttemptTimeout, Backend, GenerationRequest
from sampling_core.backends.scripted import ScriptedBackend

__all__ = [
    "AttemptTimeout",
    "Backend",
    "GenerationRequest",
    "LocalBackend",
    "OpenAIBackend",
    "ScriptedBackend",
]

_LAZY = {
    "OpenAIBackend": "sampling_core.backends.openai_compat",
    "LocalBackend": "sampling_core.backends.local",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sampling_core.backends' has no attribute {name!r}")
