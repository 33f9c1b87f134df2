"""Reading a plugin object's ``@hookimpl`` options, once per class where that is safe."""

from __future__ import annotations

import types
from typing import Any

import pluggy

_OPTS: dict[type, tuple[tuple[str, dict[str, Any]], ...]] = {}


def hookimpl_opts(
    plugin: Any, manager: pluggy.PluginManager
) -> tuple[tuple[str, dict[str, Any]], ...]:
    """``(attribute, opts)`` of every ``@hookimpl`` of ``plugin``, as pluggy parses them.

    Read once per class for instances whose hook methods come from their class (pluggy's
    ``parse_hookimpl_opts`` inspects every attribute statically, which is most of the cost
    of a per-call plugin); modules, classes and instances that set a hook attribute of
    their own are read each time.
    """

    def parsed() -> tuple[tuple[str, dict[str, Any]], ...]:
        found = ((n, manager.parse_hookimpl_opts(plugin, n)) for n in dir(plugin))
        return tuple((n, opts) for n, opts in found if opts is not None)

    if isinstance(plugin, types.ModuleType | type):
        return parsed()
    cls = type(plugin)
    opts = _OPTS.get(cls)
    if opts is None:
        opts = _OPTS[cls] = parsed()
    own = getattr(plugin, "__dict__", None)
    if own and (
        any(name in own for name, _ in opts)  # a hook method shadowed
        or any(manager.parse_hookimpl_opts(plugin, name) is not None for name in own)
    ):
        return parsed()
    return opts
