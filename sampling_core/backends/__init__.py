"""Backends: the protocol (and its streaming form), the scripted test double, and (with
extras) real models.

``OpenAIBackend`` needs the ``openai`` extra and ``LocalBackend`` the ``local`` extra;
both are imported on first access, and so is the response cache (``ResponseCache``,
``CacheError``, ``cache_identity``: SQLite is imported by those who use it). This
package's ``__all__`` is its public surface; its modules (``base``, ``scripted``,
``openai_compat``, ``openai_body``, ``local``, ``limits``, ``transport``, ``sse``,
``cache_store``, ``cache_keys``) are internal. The response cache answers for a backend as
the built-in plugin ``cache``, on the ``generation_call`` hook.
"""

from __future__ import annotations

from typing import Any

from sampling_core.backends.base import (
    AttemptTimeout,
    Backend,
    Chunk,
    GenerationRequest,
    StreamingBackend,
)
from sampling_core.backends.scripted import ScriptedBackend

__all__ = [
    "AttemptTimeout",
    "Backend",
    "CacheError",
    "Chunk",
    "GenerationRequest",
    "LocalBackend",
    "OpenAIBackend",
    "ResponseCache",
    "ScriptedBackend",
    "cache_identity",
    "StreamingBackend",
]

_LAZY = {
    "OpenAIBackend": "sampling_core.backends.openai_compat",
    "LocalBackend": "sampling_core.backends.local",
    "CacheError": "sampling_core.backends.cache_keys",
    "ResponseCache": "sampling_core.backends.cache_store",
    "cache_identity": "sampling_core.backends.cache_keys",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sampling_core.backends' has no attribute {name!r}")
